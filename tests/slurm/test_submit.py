"""One attempt's sbatch request, for each launcher: the driver's command with the resume's arguments, the
save deadline derived from the time limit, and what NeMo RL's ray.sub reads from the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.slurm.command import format_deadline, save_deadline, with_args
from supervisor.slurm.submit import build_submit_request

RAY_SUB = Path("/shared/me/RL/ray.sub")
NEMO: dict[str, Any] = {
    "name": "nrl",
    "command": "uv run ./examples/run_grpo.py --config examples/configs/grpo_math_1B.yaml",
    "launcher": {"kind": "nemo-rl", "script": str(RAY_SUB)},
    "slurm": {"account": "acct", "partition": "batch", "nodes": 2, "gpus_per_node": 8, "time": "04:00:00"},
    "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0", "mounts": ["/shared:/shared"]},
    "log_dir": "/shared/me/logs",
    "checkpoint": {"dir": "/shared/me/ckpt", "metric": "val:accuracy"},
    "resume": {"checkpoint_dir_arg": ["checkpointing.checkpoint_dir={checkpoint_dir}"]},
}


def request(spec: dict[str, Any], overrides: AttemptOverrides | None = None) -> Any:
    return build_submit_request(
        JobSpec.model_validate(spec),
        run_id="nrl-1",
        attempt=2,
        run_dir=Path("/root/runs/nrl-1"),
        overrides=overrides or AttemptOverrides(),
        environ={"PATH": "/usr/bin:/bin", "HOME": "/home/me"},
    )


def test_nemo_rl_gets_its_driver_in_command_and_every_variable_its_ray_sub_reads() -> None:
    req = request(NEMO)
    assert req.script == RAY_SUB and list(req.script_args) == []  # positional args are ignored by ray.sub
    assert req.env["COMMAND"].startswith(
        "uv run ./examples/run_grpo.py --config examples/configs/grpo_math_1B.yaml"
    )
    assert req.env["CONTAINER"] == "nvcr.io/nvidia/nemo-rl:v0.6.0" and req.env["MOUNTS"] == "/shared:/shared"
    assert req.env["GPUS_PER_NODE"] == "8" and req.env["BASE_LOG_DIR"] == "/shared/me/logs"
    assert req.env["SHEPHERD_CHECKPOINT_DIR"] == "/shared/me/ckpt"
    assert {"--account=acct", "--partition=batch", "--nodes=2", "--time=04:00:00", "--gres=gpu:8"} <= set(
        req.options
    )
    assert not any(o.startswith(("--ntasks-per-node", "--cpus-per-task")) for o in req.options)


def test_the_save_deadline_is_the_time_limit_less_the_margin_and_reaches_the_driver() -> None:
    req = request(NEMO)
    assert req.env["COMMAND"].endswith("checkpointing.checkpoint_must_save_by=00:03:50:00")  # 4 h - 10 min
    short = {**NEMO, "slurm": {**NEMO["slurm"], "time": "00:08:00"}}
    assert request(short).env["COMMAND"].endswith("checkpoint_must_save_by=00:00:06:00")  # margin <= limit/4


def test_a_deadline_the_user_set_or_a_spec_without_a_time_limit_is_left_alone() -> None:
    own = {**NEMO, "command": NEMO["command"] + " checkpointing.checkpoint_must_save_by=00:01:00:00"}
    assert request(own).env["COMMAND"].count("checkpoint_must_save_by") == 1
    assert (
        "checkpoint_must_save_by"
        not in request({**NEMO, "slurm": {**NEMO["slurm"], "time": None}}).env["COMMAND"]
    )
    assert save_deadline(JobSpec.model_validate({**NEMO, "resume": {"deadline_arg": None}})) is None


def test_our_trainer_gets_the_deadline_only_when_its_spec_names_the_argument() -> None:
    ours: dict[str, Any] = {
        "name": "t",
        "command": ["python", "-m", "trainer"],
        "slurm": {"time": "01:00:00"},
    }
    assert request(ours).script_args[-1] == "trainer"
    named = {**ours, "resume": {"deadline_arg": "checkpointing.checkpoint_must_save_by={deadline}"}}
    assert request(named).script_args[-1] == "checkpointing.checkpoint_must_save_by=00:00:50:00"


def test_a_staged_checkpoint_dir_replaces_the_commands_own_in_a_shell_string_or_an_argv() -> None:
    staged = AttemptOverrides(checkpoint="/s/step_20", checkpoint_dir="/s")
    spec = {**NEMO, "command": NEMO["command"] + " checkpointing.checkpoint_dir=/shared/me/ckpt"}
    command = request(spec, staged).env["COMMAND"]
    assert "checkpointing.checkpoint_dir=/s " in command and "/shared/me/ckpt" not in command
    assert with_args(["python", "run.py", "a=1", "x=1"], ["a=2", "--flag"]) == [
        "python",
        "run.py",
        "a=2",
        "x=1",
        "--flag",
    ]
    assert with_args("run.py 'b=has space' c=1", ["b=new value"]) == "run.py 'b=new value' c=1"


def test_a_fix_that_mounts_the_shared_cache_adds_it_to_the_containers_mounts() -> None:
    fixed = AttemptOverrides(env={"HF_HOME": "/shared/cache/hf"}, mounts=("/shared/cache:/shared/cache",))
    req = request(NEMO, fixed)
    assert (
        req.env["MOUNTS"] == "/shared:/shared,/shared/cache:/shared/cache"
        and req.env["HF_HOME"] == "/shared/cache/hf"
    )


@pytest.mark.parametrize(
    ("patch", "needs"),
    [
        ({"slurm": {"partition": "batch"}}, "slurm.account"),
        ({"slurm": {"account": "a"}}, "slurm.partition"),
        ({"container": None}, "container.image"),
        ({"container": {"image": "x"}}, "container.mounts"),
        ({"launcher": {"kind": "nemo-rl"}}, "`script`"),
    ],
)
def test_a_nemo_rl_spec_missing_what_its_ray_sub_needs_is_refused_with_the_reason(
    patch: dict[str, Any], needs: str, tmp_path: Path
) -> None:
    from supervisor.domain.spec import load_spec

    spec = {**NEMO, **patch}
    path = tmp_path / "spec.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(YamlDocumentError) as err:
        load_spec(path)
    assert needs in str(err.value)


def test_deadlines_are_nemo_rls_dd_hh_mm_ss() -> None:
    assert format_deadline(3 * 86400 + 4 * 3600 + 5 * 60 + 6) == "03:04:05:06"


def test_with_restart_in_place_the_driver_runs_under_the_runner_for_either_launcher() -> None:
    from supervisor.slurm.launchers.runner import ENV_WAIT, script_path

    runner = script_path(Path("/shared/me/logs"), "nrl-1")
    spec = JobSpec.model_validate(
        {**NEMO, "resume": {**NEMO["resume"], "in_place": True, "in_place_wait_s": 120}}
    )
    kw: dict[str, Any] = {"run_id": "nrl-1", "attempt": 1, "run_dir": Path("/root/runs/nrl-1")}
    nemo = build_submit_request(
        spec, overrides=AttemptOverrides(), environ={"PATH": "/bin"}, runner_script=runner, **kw
    )
    assert nemo.env["COMMAND"].startswith(
        "sh /shared/me/logs/nrl-1-runner.sh bash -c 'uv run ./examples/run_grpo.py"
    )
    assert nemo.env[ENV_WAIT] == "120"
    assert nemo.env["MOUNTS"] == "/shared:/shared"  # the spec's mount shows the log folder already
    ours = JobSpec.model_validate(
        {"name": "o", "command": ["python", "train.py"], "resume": {"in_place": True}}
    )
    req = build_submit_request(
        ours, overrides=AttemptOverrides(), environ={"PATH": "/bin"}, runner_script=runner, **kw
    )
    assert list(req.script_args) == ["sh", str(runner), "python", "train.py"]
    assert req.env[ENV_WAIT] == "600"


@pytest.mark.parametrize(
    ("mounts", "launcher", "expected"),
    [
        (["/data:/data"], "nemo-rl", "/data:/data,/shared/me/logs:/shared/me/logs"),
        (["/lustre:/shared"], "nemo-rl", "/lustre:/shared,/shared/me/logs:/shared/me/logs"),  # elsewhere
        (["/shared/me:/shared/me:ro"], "nemo-rl", "/shared/me:/shared/me:ro"),
        (["/data"], "shepherd", "/data,/shared/me/logs:/shared/me/logs"),
        (["/shared"], "shepherd", "/shared"),
    ],
)
def test_under_the_runner_a_container_gets_the_log_folder_mounted_unless_a_mount_shows_it_as_it_is(
    mounts: list[str], launcher: str, expected: str
) -> None:
    """The runner, its folders and Shepherd's words live in the log folder: the driver's container must see
    it at the path the job was given, whatever the user mounted."""
    from supervisor.slurm.launchers.runner import script_path

    spec = {**NEMO, "container": {"image": "img", "mounts": mounts}}
    if launcher == "shepherd":
        spec |= {"launcher": {"kind": "shepherd"}, "command": ["python", "train.py"]}
    req = build_submit_request(
        JobSpec.model_validate(spec),
        run_id="nrl-1",
        attempt=1,
        run_dir=Path("/root/runs/nrl-1"),
        overrides=AttemptOverrides(),
        environ={"PATH": "/bin"},
        runner_script=script_path(Path("/shared/me/logs"), "nrl-1"),
    )
    assert req.env["MOUNTS"] == expected
    assert request(spec).env["MOUNTS"] == ",".join(mounts)  # not under the runner: the spec's own


def test_spare_nodes_ask_slurm_for_n_plus_k_nodes_with_no_kill_and_size_the_trainer_to_n() -> None:
    spares = {"slurm": {"nodes": 2, "spare_nodes": 1}, "resume": {"in_place": True}}
    req = request({"name": "o", "command": ["python", "train.py"], **spares})
    assert "--nodes=3" in req.options and "--no-kill" in req.options
    assert req.script_args[-1] == "cluster.num_nodes=2"  # our trainer's key (NeMo RL's too)
    shell = request({"name": "o", "command": "python train.py", **spares})
    assert shell.script_args[-1].endswith("python train.py cluster.num_nodes=2")


def test_without_spares_the_job_has_its_nodes_and_slurms_default_kill_and_the_trainer_its_own_count() -> None:
    req = request(NEMO)
    assert "--no-kill" not in req.options and "cluster.num_nodes" not in req.env["COMMAND"]


def test_a_node_count_the_user_gave_the_trainer_wins() -> None:
    spares = {"slurm": {"nodes": 2, "spare_nodes": 1}, "resume": {"in_place": True}}
    req = request({"name": "o", "command": "python train.py cluster.num_nodes=2", **spares})
    assert " ".join(req.script_args).count("cluster.num_nodes=") == 1


def test_spare_nodes_without_restart_in_place_or_under_nemo_rls_ray_sub_are_refused() -> None:
    off = {"name": "o", "command": ["x"], "slurm": {"spare_nodes": 1}, "resume": {"in_place": False}}
    with pytest.raises(ValueError, match=r"spare_nodes needs restart in place, which this spec turns off"):
        JobSpec.model_validate(off)
    assert JobSpec.model_validate({**off, "resume": {}}).resume.in_place  # the default: spares just work
    nemo = {**NEMO, "slurm": {**NEMO["slurm"], "spare_nodes": 1}}
    with pytest.raises(ValueError, match="starts Ray again on a drained node"):
        JobSpec.model_validate(nemo)
