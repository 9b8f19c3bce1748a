"""Preflight's judgements on made-up facts, and its probes on real folders: each problem names the spec field,
the reason and the fix; what cannot be checked in time is a warning, never a refusal."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from supervisor.domain.spec import JobSpec
from supervisor.preflight.checks import Need, PathFacts, judge_model_dir, judge_path, judge_sbatch, needs
from supervisor.preflight.probe import run_preflight

LOCAL = PathFacts(exists=True, is_dir=True, fs="ext4", shared=False, readable=True, writable=True)
SHARED = PathFacts(exists=True, is_dir=True, fs="nfs4", shared=True, readable=True, writable=True)


def spec(tmp: Path, **extra: object) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "t", "command": ["python", "train.py"], "workdir": str(tmp), **extra}
    )


def test_every_path_the_job_touches_is_a_need(tmp_path: Path) -> None:
    s = spec(
        tmp_path,
        command=["/opt/venv/bin/python", "x.py"],
        model_dir="/models/qwen",
        checkpoint={"dir": "/ck"},
        log_dir="/logs",
        shared_cache_dir="/cache",
        container={"image": "/images/nemo.sqsh", "mounts": ["/data:/data", "relative:/x"]},
    )
    fields = [n.field for n in needs(s)]
    assert fields == [
        "workdir",
        "command",
        "model_dir",
        "checkpoint.dir",
        "log_dir",
        "shared_cache_dir",
        "container.image",
        "container.mounts[0]",
    ]
    ck = next(n for n in needs(s) if n.field == "checkpoint.dir")
    assert ck.writable and not ck.must_exist


def test_a_path_on_the_login_nodes_local_disk_is_refused_with_a_fix() -> None:
    [p] = judge_path(Need("workdir", Path("/tmp/run"), "dir"), LOCAL, [], frozenset())
    assert (
        p.field == "workdir" and "local to this login node" in p.reason and "preflight.shared_paths" in p.fix
    )
    assert p.blocking
    assert judge_path(Need("workdir", Path("/tmp/run"), "dir"), SHARED, [], frozenset()) == []
    assert judge_path(Need("workdir", Path("/tmp/run"), "dir"), LOCAL, [Path("/tmp")], frozenset()) == []
    assert judge_path(Need("workdir", Path("/tmp/run"), "dir"), LOCAL, [], frozenset({"shared"})) == []


def test_missing_unreadable_and_unwritable_paths_are_named() -> None:
    missing = PathFacts(False, False, "nfs", True, False)
    [p] = judge_path(Need("model_dir", Path("/m"), "dir"), missing, [], frozenset())
    assert "does not exist" in p.reason
    [p] = judge_path(Need("command", Path("/bin"), "file"), SHARED, [], frozenset())
    assert "a directory, not a file" in p.reason
    unreadable = PathFacts(True, True, "nfs", True, False)
    [p] = judge_path(Need("workdir", Path("/w"), "dir"), unreadable, [], frozenset())
    assert "not readable" in p.reason
    read_only = PathFacts(True, True, "nfs", True, True, writable=False)
    [p] = judge_path(Need("checkpoint.dir", Path("/ck"), "dir", writable=True), read_only, [], frozenset())
    assert p.field == "checkpoint.dir" and "cannot create files" in p.reason


def test_a_model_dir_needs_its_config_and_weights() -> None:
    assert judge_model_dir("model_dir", Path("/m"), ["config.json", "model.safetensors"]) == []
    assert judge_model_dir("model_dir", Path("/m"), ["config.json", "model.safetensors.index.json"]) == []
    problems = judge_model_dir("model_dir", Path("/m"), ["tokenizer.json"])
    assert [("config.json" in p.reason, "weights" in p.reason) for p in problems] == [
        (True, False),
        (False, True),
    ]


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("sbatch: error: invalid partition specified: nope", "slurm.partition"),
        ("Invalid account or account/partition combination specified", "slurm.account"),
        ("Invalid qos specification", "slurm.qos"),
        ("Requested time limit is invalid (missing or exceeds some limit)", "slurm.time"),
        ("Requested node configuration is not available", "slurm.gpus_per_node"),
        ("something else entirely", "slurm"),
    ],
)
def test_sbatch_refusals_name_the_spec_field(message: str, field: str) -> None:
    p = judge_sbatch(message)
    assert p.field == field and message in p.reason and p.blocking


def test_the_probes_find_a_bad_model_dir_and_an_unwritable_checkpoint_parent(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    s = spec(tmp_path, model_dir=str(model), checkpoint={"dir": str(locked / "ck")})
    try:
        problems = anyio.run(lambda: run_preflight(s, slurm=None, timeout_s=10, shared_paths=[Path("/")]))
    finally:
        locked.chmod(0o700)
    text = [str(p) for p in problems]
    assert any(t.startswith("model_dir:") and "no weights" in t for t in text), text
    if os.geteuid() != 0:  # root may create files anywhere
        assert any(t.startswith("checkpoint.dir:") and "cannot create" in t for t in text), text


def test_a_local_path_is_refused_unless_declared_shared_and_skip_all_checks_nothing(tmp_path: Path) -> None:
    s = spec(tmp_path)
    problems = anyio.run(lambda: run_preflight(s, slurm=None, timeout_s=10))
    if not any("local to this login node" in p.reason for p in problems):
        pytest.skip(f"{tmp_path} is on a shared filesystem here")
    assert [p.field for p in problems] == ["workdir"]
    skipped = spec(tmp_path, preflight={"skip": ["all"]})
    assert anyio.run(lambda: run_preflight(skipped, slurm=None, timeout_s=10)) == []


def test_paths_not_probed_in_time_are_warnings_not_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung NFS mount: the probe blocks; preflight returns on time and says what it could not check."""
    import threading

    from supervisor.preflight import probe as probe_module

    release = threading.Event()

    def hang(need: Need) -> PathFacts:
        release.wait(30)
        return SHARED

    monkeypatch.setattr(probe_module, "probe", hang)
    try:
        problems = anyio.run(lambda: run_preflight(spec(tmp_path), slurm=None, timeout_s=0.5))
    finally:
        release.set()
    assert [(p.field, p.blocking) for p in problems] == [("workdir", False)]
    assert "no answer within 0.5 s" in problems[0].reason
