"""`shepherd resume RUN --set KEY=VALUE`: refused at once with the spec's own located error, else carried out
and shown by `status RUN` with who changed what."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.domain.runs import RunState
from supervisor.store import Store

RUN = "grpo-20261127-000000-abcd"
SPEC = {
    "name": "grpo",
    "command": ["python", "run_grpo.py", "grpo.max_num_steps=6"],
    "pass_env": ["HF_TOKEN"],
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    store = Store(root / "state" / "shepherd.sqlite3")
    store.create_run(RUN, "grpo", json.dumps(SPEC), str(root / "runs" / RUN / "spec.yaml"))
    store.set_run_state(RUN, RunState.FAILED, reason="OOM")
    store.close()
    return root


def spec_of(root: Path) -> dict[str, object]:
    store = Store(root / "state" / "shepherd.sqlite3")
    try:
        run = store.get_run(RUN)
        assert run is not None
        return run.spec.model_dump(mode="json")
    finally:
        store.close()


def test_a_misspelt_key_is_refused_with_the_near_miss_and_nothing_changes(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(root), "resume", RUN, "--set", "resume.max_attemps=3"]) == 1
    err = capsys.readouterr().err
    assert "--set: resume.max_attemps: unknown key (not allowed here); did you mean `max_attempts`?" in err
    assert spec_of(root)["resume"]["max_attempts"] == 4  # type: ignore[index]


def test_a_secret_is_refused_without_being_echoed(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(root), "resume", RUN, "--set", "env.HF_TOKEN=hf_secretvalue1"]) == 1
    out, err = capsys.readouterr()
    assert "HF_TOKEN: a secret variable" in err
    assert "hf_secretvalue1" not in out + err
    assert not list((root / "state").rglob("*.json"))  # no request file carried it anywhere


def test_a_change_is_applied_and_status_shows_who_made_it(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--root", str(root), "resume", RUN, "--set", "command+=grpo.max_num_steps=8"]
    assert main([*argv, "--set", "slurm.time=02:00:00"]) == 0
    assert "changed: command+grpo.max_num_steps: grpo.max_num_steps=6 -> grpo.max_num_steps=8" in (
        capsys.readouterr().out
    )
    assert spec_of(root)["command"] == ["python", "run_grpo.py", "grpo.max_num_steps=8"]
    assert main(["--root", str(root), "status", RUN]) == 0
    shown = capsys.readouterr().out
    assert "changes:" in shown
    assert "(next attempts): slurm.time: (unset) -> 02:00:00" in shown
    assert "cli:" in shown.split("changes:")[1]
