"""A Slurm requeue is the same attempt going on, not a failure: the daemon keeps the chain and watches the
restart's own log folder (`<jobid>-<restart count>-logs/`, NeMo RL's convention), so a failure there is
still seen and acted on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"

# First run: works (says so) and keeps going. After the requeue: a CUDA OOM, exit 1.
JOB = (
    'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then echo "step 1 done"; sleep 300; '
    'else echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."; exit 1; fi'
)


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: Any) -> Any:
    root = tmp_path_factory.mktemp("requeue-daemon")
    d = DaemonProcess(root / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def test_a_requeued_job_stays_one_attempt_and_its_restart_folder_is_watched(
    sup: DaemonProcess, slurm_cluster: Any, tmp_path: Path
) -> None:
    spec = tmp_path / "rq.yaml"
    spec.write_text(
        "\n".join(
            [
                "name: rq",
                f"command: {json.dumps(['bash', '-c', JOB])}",
                f"workdir: {tmp_path}",
                "slurm: {cpus: 1, time: '00:10:00', extra_args: ['--requeue', '--open-mode=append']}",
                "resume: {backoff_s: 0, max_attempts: 2}",
            ]
        )
        + "\n"
    )
    run = sup.submit(spec)
    try:
        first = wait_for(
            lambda: next(
                (a for a in sup.status(run).get("attempt_list", []) if a["slurm_state"] == "RUNNING"), None
            ),
            90,
            0.5,
            "attempt 1 running",
        )
        job = str(first["job_id"])
        driver = wait_for(
            lambda: next(
                (Path(p) for p in _log_files(tmp_path, sup, job) if p.endswith("ray-driver.log")), None
            ),
            60,
            0.5,
            "the first run's driver log",
        )
        wait_for(lambda: "step 1 done" in driver.read_text(), 60, 0.5, "the first run's output")

        slurm_cluster.run("scontrol", "requeue", job)
        wait_for(
            lambda: slurm_cluster.job_state(job)[0] == "PENDING", 60, 0.2, "the requeued job pending again"
        )
        # Skip the requeue's BeginTime delay (~10 s) where Slurm lets us.
        slurm_cluster.run("scontrol", "update", f"jobid={job}", "StartTime=now", check=False)

        def oom_decision() -> dict[str, Any] | None:
            return next((d for d in sup.status(run).get("decisions", []) if d["rule"] == "cuda-oom"), None)

        decision = wait_for(oom_decision, 120, 0.5, "the OOM in the restart's folder recognised")
        status = sup.status(run)
        # The requeue itself decided nothing: the only decision is the OOM's, on attempt 1, same job id.
        acting = [d for d in status["decisions"] if d["action"] != "none" and d["rule"] != "run-completed"]
        assert [d["rule"] for d in acting] == ["cuda-oom"], acting
        assert decision["attempt"] == 1
        assert status["attempt_list"][0]["job_id"] == job
        assert "OutOfMemoryError" in "\n".join(decision["evidence"].get("lines") or [])
        restart_dir = next(
            p for p in _log_dirs(tmp_path, sup, job) if p.name == f"{job}-1-logs"
        )  # the restart wrote its own folder, and that is where the OOM was read
        assert "OutOfMemoryError" in (restart_dir / "ray-driver.log").read_text()
        assert "OutOfMemoryError" not in (restart_dir.parent / f"{job}-logs" / "ray-driver.log").read_text()
        # The resume made attempt 2, restarted in place by the requeued job's runner (the folder its second
        # start claimed, <run>-a1-1-runner): the same job, no sbatch.
        wait_for(lambda: len(sup.status(run).get("attempt_list", [])) >= 2, 60, 0.5, "attempt 2")
        second = sup.status(run)["attempt_list"][1]
        assert second["job_id"] == job and second["tag"].startswith("inplace:1:"), second
        assert (sup.root / "runs" / run / "logs" / f"{run}-a1-1-runner" / "word-1").exists()
    finally:
        sup.cli("cancel", run, check=False)


def _log_dirs(tmp: Path, sup: DaemonProcess, job: str) -> list[Path]:
    """`<jobid>-logs` and `<jobid>-N-logs`, wherever the daemon put the run's logs."""
    found = subprocess.run(
        ["find", str(tmp), str(sup.root), "-maxdepth", "4", "-type", "d", "-name", f"{job}-*logs"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return sorted(Path(p) for p in found)


def _log_files(tmp: Path, sup: DaemonProcess, job: str) -> list[str]:
    return [str(f) for d in _log_dirs(tmp, sup, job) for f in d.iterdir()]
