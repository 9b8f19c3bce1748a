"""The daemon running NeMo RL's own ray.sub, UNMODIFIED (main and v0.6.0), on the dev Slurm cluster.

What a NeMo RL user sees end to end: a chain of attempts through ray.sub (a node-local HF cache fixed by a
resume with HF_HOME and a mount, a save deadline passed by shepherd and honoured by the trainer, completion at
grpo.max_num_steps), metrics from TensorBoard or from the driver log, a job submitted by hand and adopted, a
resume from the best checkpoint, a Ray bring-up failure read from ray.sub's ENDED marker, and a failed
first head start left to ray.sub's own retry.

The driver is tests/support/nemo_rl_standin.py (NeMo RL's files and lines, no model) joining the real Ray
cluster ray.sub starts. The pyxis stand-in takes the container options; nothing is containerised.
ray.sub runs `ray stop`, which kills every Ray process of the user on the machine: the module holds
tests/support/raylock.py's lock exclusive while its jobs run. What each ray.sub needs from the dev cluster:
docs/dev-cluster.md.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.raylock import ray_users

from .conftest import VENV_BIN, SlurmCluster

# ray_stop: NeMo RL's ray.sub runs `ray stop` and clears /tmp/ray/session_*: alone among Ray tests
pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.ray_stop, pytest.mark.slow]

STANDIN = REPO / "tests" / "support" / "nemo_rl_standin.py"
SHARED = REPO.parent / "shared" / "third_party" / "nemo-rl"
OWN = os.environ.get("SHEPHERD_NEMO_RL_RAYSUB")  # another ray.sub (a NeMo RL checkout's) in place of both
MAIN = Path(OWN) if OWN else SHARED / "ray.sub.main-7ea279a"
V060 = Path(OWN) if OWN else SHARED / "ray.sub.v0.6.0"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}
TIME = "00:15:00"  # -> the deadline shepherd passes: 15 min - min(10 min, 15 min / 4) = 00:00:11:15


@pytest.fixture(scope="module")
def ray_lock() -> Iterator[None]:
    with ray_users(exclusive=True):  # ray.sub's `ray stop`: no other Ray test runs while its jobs do
        yield


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: SlurmCluster, ray_lock: None) -> Any:
    for script in (MAIN, V060):
        if not script.is_file():
            pytest.skip(f"no NeMo RL ray.sub at {script} (../shared, or set SHEPHERD_NEMO_RL_RAYSUB)")
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv (scripts/setup)")
    d = DaemonProcess(tmp_path_factory.mktemp("nemo-rl-raysub") / "root", env=slurm_cluster.env)
    d.start()
    yield d
    d.stop()


def driver(tmp: Path, name: str, *args: str) -> str:
    """The COMMAND, as a NeMo RL user writes it: one shell string of Hydra-style overrides."""
    argv = ["python", str(STANDIN), f"checkpointing.checkpoint_dir={tmp / name / 'results'}"]
    return shlex.join([*argv, "--record", str(tmp / name / "record.jsonl"), *args])


def nemo_spec(
    tmp: Path,
    name: str,
    script: Path,
    command: str,
    *lines: str,
    env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    in_place: bool = True,
) -> Path:
    """A spec with launcher nemo-rl, written the way docs/nemo-rl.md shows it."""
    env = {
        "RAY_AUTH_MODE": "disabled",
        **(env or {}),
    }  # else `ray status` fails once ~/.ray/auth_token exists
    if "CPUTot" not in script.read_text():  # v0.6.0 asks GPUS_PER_NODE*16 CPUs (later: the node's CPUTot)
        env.setdefault("CPUS_PER_WORKER", "8")  # the dev nodes have 8
    ck = tmp / name / "results"
    ck.mkdir(parents=True, exist_ok=True)
    text = "\n".join(
        [
            f"name: {name}",
            f"command: {json.dumps(command)}",
            f"workdir: {tmp}",
            f"launcher: {{kind: nemo-rl, script: {script}}}",
            f"slurm: {{account: shepherd, partition: gpu, nodes: 1, gpus_per_node: 4, time: '{TIME}',"
            f" extra_args: {json.dumps(list(extra_args))}}}",
            f"container: {{image: nvcr.io/nvidia/nemo-rl:v0.6.0, mounts: ['{tmp}:{tmp}']}}",
            f"env: {json.dumps(env)}",
            f"checkpoint: {{dir: {ck}, metric: 'val:accuracy'}}",
            "resume: {backoff_s: 0, checkpoint_dir_arg: ['checkpointing.checkpoint_dir={checkpoint_dir}']"
            + ("}" if in_place else ", in_place: false}"),
            *lines,
        ]
    )
    path = tmp / f"{name}.yaml"
    path.write_text(text + "\n")
    return path


def records(tmp: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp / name / "record.jsonl").read_text().splitlines()]


def acted(status: dict[str, Any]) -> list[str]:
    """The rules that acted on the run, in order."""
    return [d["rule"] for d in status["decisions"] if d["action"] != "none"]


def test_a_chain_through_ray_sub_fixes_the_hf_cache_stops_at_its_deadline_and_completes(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    """main's ray.sub, TensorBoard on: attempt 1 dies at policy init (HF->mcore conversion in a node-local
    cache), attempt 2 gets HF_HOME on the shared dir, mounted, and stops at the save deadline shepherd
    passed (exit 0, steps left), attempt 3 resumes from its newest step and completes."""
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    logs = tmp_path / "chain" / "logs"
    command = driver(
        tmp_path, "chain", "--ray", "--hf-cache-check", str(shared), "--steps", "20", "--step-seconds", "0.5",
        "--deadline-scale", "0.01", f"logger.log_dir={logs}", "logger.tensorboard_enabled=true",
    )  # fmt: skip
    path = nemo_spec(
        tmp_path, "chain", MAIN, command, f"shared_cache_dir: {shared}", f"trainer_log_dir: {logs}"
    )
    run = sup.submit(path)
    final = sup.wait_state(run, FINAL, timeout=480)
    status = sup.status(run)
    assert final["state"] == "COMPLETED", status
    rules = acted(status)
    assert rules[0] == "hf-cache-not-shared" and rules[-1] == "run-completed", rules
    assert "training-deadline" in rules, rules

    first, second, *rest = records(tmp_path, "chain")
    assert first["ray"] == {"nodes": 1, "worker_units": 4.0}  # the driver joined ray.sub's Ray cluster
    assert first["hf_home"] is None and first["deadline"] == "00:00:11:15"
    assert second["hf_home"] == f"{shared}/huggingface"
    assert f"{shared}:{shared}" in second["pyxis"]["MOUNTS"].split(",")  # the fix's mount reached pyxis
    assert rest and rest[0]["resumed_from"] >= 10  # the deadline save (or step_10 under heavy load)
    assert status["attempt_list"][1]["overrides"]["mounts"] == [f"{shared}:{shared}"]
    assert (tmp_path / "chain" / "results" / "step_20").is_dir()

    shown = wait_for(lambda: (sup.status(run)["progress"] or {}).get("metrics"), what="metrics")
    assert shown["step"] == 20 and shown["train:reward"] == 1.0, shown  # from TensorBoard's train/reward
    assert (tmp_path / "chain" / "logs" / f"exp_{len(records(tmp_path, 'chain')) - 1:03d}").is_dir()
    frame = sup.cli("watch", "--once", run).stdout
    assert run in frame and "step 20/20" in frame and "reward 1 @20" in frame, frame
    png = tmp_path / "chain.png"
    sup.cli("plot", run, "-o", str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_hand_submitted_ray_sub_job_is_adopted_and_resumed_from_its_best_step(
    sup: DaemonProcess, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """v0.6.0's ray.sub, TensorBoard off: `COMMAND=... sbatch ray.sub` by hand, `shepherd adopt`, the driver
    fails, `shepherd resume RUN best` stages step_10 (hard links) and the run completes; metrics come from
    the driver log; the user's checkpoint dir is untouched although the resumed job's retention deletes."""
    hand = tmp_path / "hand"
    hand.mkdir()
    command = driver(
        tmp_path, "adopted", "--fail-at", "31", "--failure", "odd", "--peak", "10", "--steps", "40",
        "--resumed-gain", "0.2", "checkpointing.keep_top_k=1", "logger.tensorboard_enabled=false",
    )  # fmt: skip
    env = {
        **slurm_cluster.env,
        "COMMAND": command,
        "CONTAINER": "nvcr.io/nvidia/nemo-rl:v0.6.0",
        "MOUNTS": f"{tmp_path}:{tmp_path}",
        "GPUS_PER_NODE": "4",
        **({} if "CPUTot" in V060.read_text() else {"CPUS_PER_WORKER": "8"}),
        "RAY_AUTH_MODE": "disabled",
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
    }
    sbatch = ["sbatch", "--parsable", "--nodes=1", "--account=shepherd", "--partition=gpu", f"--time={TIME}"]
    job = (
        subprocess.run([*sbatch, str(V060)], env=env, cwd=hand, capture_output=True, text=True, check=True)
        .stdout.strip()
        .split(";")[0]
    )
    path = nemo_spec(tmp_path, "adopted", V060, command)
    # This user picks the checkpoint after an unknown crash themselves (else it resumes once from latest).
    path.write_text(
        path.read_text().replace(
            "resume: {backoff_s: 0,", "resume: {backoff_s: 0, unrecognised_after_progress: false,"
        )
    )
    run = sup.cli("adopt", job, "--spec", str(path)).stdout.strip().split()[-1]
    failed = sup.wait_state(run, FINAL, timeout=300)
    assert failed["state"] == "FAILED", sup.status(run)
    ck = tmp_path / "adopted" / "results"
    before = {p.name: (p / "training_info.json").read_text() for p in ck.glob("step_*")}
    assert sorted(before) == ["step_10", "step_30"]  # keep_top_k=1 (the peak) + the latest
    assert (hand / f"slurm-{job}.out").exists() and (hand / f"{job}-logs" / "ray-driver.log").exists()

    assert "step_10" in sup.cli("resume", run, "best").stdout
    final = sup.wait_state(run, FINAL, timeout=300)
    status = sup.status(run)
    assert final["state"] == "COMPLETED", status
    attempts = status["attempt_list"]
    assert attempts[0]["job_id"] == job and len(attempts) == 2
    staged = tmp_path / "adopted" / "results.staged" / run / "attempt-2"
    _, second = records(tmp_path, "adopted")
    assert second["resumed_from"] == 10 and second["checkpoint_dir"] == str(staged)
    # The resumed attempt validated better: NeMo RL's retention rmtree'd the staged step_10 itself.
    assert sorted(p.name for p in staged.glob("step_*")) == ["step_20", "step_40"]
    assert {p.name: (p / "training_info.json").read_text() for p in ck.glob("step_*")} == before

    shown = wait_for(lambda: (sup.status(run)["progress"] or {}).get("metrics"), what="metrics")
    assert shown["step"] == 40 and shown["train:reward"] == 1.0, shown  # `• Avg Reward` in ray-driver.log
    assert shown["val:accuracy"] == pytest.approx(0.9), shown  # `• Accuracy` of step 40's validation


BOTH = pytest.mark.parametrize("script", [MAIN, V060], ids=["main", "v0.6.0"])


@BOTH
def test_ray_bring_up_failure_is_read_from_ended(sup: DaemonProcess, script: Path, tmp_path: Path) -> None:
    """CPUS_PER_WORKER above the node's CPUs: the head srun is refused, ray.sub writes ENDED and exits 1;
    ray-startup-failed names it (and the run gives up: one attempt allowed)."""
    command = driver(tmp_path, "no-ray")
    path = nemo_spec(tmp_path, "no-ray", script, command, env={"CPUS_PER_WORKER": "64"})
    path.write_text(
        path.read_text().replace("resume: {backoff_s: 0,", "resume: {backoff_s: 0, max_attempts: 1,")
    )
    run = sup.submit(path)
    final = sup.wait_state(run, FINAL, timeout=180)
    status = sup.status(run)
    assert final["state"] == "GAVE_UP", status
    [d] = [d for d in status["decisions"] if d["rule"] == "ray-startup-failed"]
    assert "ENDED" in d["reason"], d
    assert not (tmp_path / "no-ray" / "record.jsonl").exists()  # the driver never ran


@BOTH
def test_a_head_start_that_fails_once_is_left_to_ray_subs_own_retry(
    sup: DaemonProcess, script: Path, tmp_path: Path
) -> None:
    """ray.sub tries `ray start --head` up to 3 times. A `ray` first on the job's PATH fails the first head
    start with Ray's GCS error; ray.sub retries, the second start comes up: the job is not cancelled (no
    resubmission of a job that was about to work) and the run completes as its only attempt."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ray").write_text(
        f"#!/bin/bash\nonce={tmp_path / 'failed-once'}\n"
        'if [[ $1 == start && " $* " == *" --head "* ]] && mkdir "$once" 2>/dev/null; then\n'
        '  echo "ConnectionError: Failed to connect to GCS at address 127.0.0.1:1200 within 5 seconds." >&2\n'
        "  exit 1\n"
        "fi\n"
        f'exec {VENV_BIN / "ray"} "$@"\n'
    )
    (bin_dir / "ray").chmod(0o755)
    logs = tmp_path / "retried" / "slurm-logs"
    command = driver(tmp_path, "retried", "--ray", "--steps", "2")
    env = {"PATH": f"{bin_dir}:{VENV_BIN}:{os.environ['PATH']}"}
    run = sup.submit(nemo_spec(tmp_path, "retried", script, command, f"log_dir: {logs}", env=env))
    final = sup.wait_state(run, FINAL, timeout=240)
    status = sup.status(run)
    assert final["state"] == "COMPLETED", status
    assert len(status["attempt_list"]) == 1 and acted(status) == ["run-completed"], status
    [head_log] = logs.glob("*-logs/ray-head.log")
    text = head_log.read_text()
    assert "Failed to connect to GCS" in text and "Head node failed 1/3 times" in text  # it did retry


@BOTH
def test_a_requeued_job_is_followed_into_its_restart_folder(
    sup: DaemonProcess, slurm_cluster: SlurmCluster, script: Path, tmp_path: Path
) -> None:
    """A requeued job goes on as the same attempt. main's ray.sub logs the restart to
    `<jobid>-<restart>-logs/`, v0.6.0's to the same `<jobid>-logs/`, truncating ray-driver.log: either way
    the progress comes from the restarted driver (the first run is requeued long before its last step, 20)."""
    logs = tmp_path / "requeued" / "slurm-logs"
    command = driver(tmp_path, "requeued", "--steps", "20", "--step-seconds", "1")
    # Under Shepherd's runner (the default) the requeued start claims a runner folder of its own, and its
    # driver's end must be answered there, or the job holds its nodes for the runner's whole bound.
    path = nemo_spec(tmp_path, "requeued", script, command, f"log_dir: {logs}", extra_args=("--requeue",))
    run = sup.submit(path)

    def step() -> int:
        return int((((sup.status(run) or {}).get("progress") or {}).get("step") or {}).get("n", 0))

    wait_for(lambda: step() >= 2, timeout=240, what="the first run's steps")
    job = sup.status(run)["attempt_list"][0]["job_id"]
    slurm_cluster.run("scontrol", "requeue", job)
    final = sup.wait_state(run, FINAL, timeout=300)
    status = sup.status(run)
    assert final["state"] == "COMPLETED", status
    assert [a["job_id"] for a in status["attempt_list"]] == [job]  # a requeue is not a new attempt
    # Two launches of the driver, both attempt 1 (main clears SLURM_* before the driver: no job id there).
    assert [r["attempt"] for r in records(tmp_path, "requeued")] == [1, 1]
    restart_folders = "SLURM_RESTART_COUNT" in script.read_text()
    want = [f"{job}-1-logs", f"{job}-logs"] if restart_folders else [f"{job}-logs"]
    assert sorted(p.name for p in logs.glob(f"{job}-*logs")) == want
    # Only the restarted run got there. Its last lines may land after Slurm says COMPLETED: the daemon keeps
    # reading an ended attempt's files for DRAIN_AFTER_END_S (15 s), so the final step is awaited, not raced.
    wait_for(lambda: step() == 20, timeout=40, what="the restarted run's last step (20)")
