"""pass_env: `shepherd submit` takes the values from its own environment into a private file beside the
queued spec (never into it), intake moves that file beside the run, and a spec that names pass_env without
one (dropped into the queue by hand) is rejected, saying why; a rejected spec's values are not kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.domain.envfiles import PASS_ENV_FILE, read_private_env_file
from supervisor.intake.queue import Intake, keep_pass_env, pass_env_sidecar

KEY = "wandb-0123456789abcdef-secret"
SPEC = "name: toy\ncommand: env\npass_env: [WANDB_API_KEY]\n"


def intake_of(root: Path) -> Intake:
    for d in ("queue", "runs", "rejected"):
        (root / d).mkdir(parents=True, exist_ok=True)
    return Intake(root / "queue", root / "runs", root / "rejected", settle_s=0.0)


def test_submit_keeps_the_value_beside_the_spec_and_intake_moves_it_beside_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "toy.yaml"
    spec.write_text(SPEC)
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    root = tmp_path / "root"
    assert main(["--root", str(root), "submit", "--no-preflight", str(spec)]) == 0
    run_id = capsys.readouterr().out.strip()
    queued = root / "queue" / f"{run_id}.yaml"
    assert KEY not in queued.read_text()
    sidecar = pass_env_sidecar(queued)
    assert sidecar.stat().st_mode & 0o777 == 0o600
    assert read_private_env_file(sidecar) == {"WANDB_API_KEY": KEY}

    [claimed], rejected = intake_of(root).scan()
    assert rejected == [] and claimed.run_id == run_id
    kept = root / "runs" / run_id / PASS_ENV_FILE
    assert read_private_env_file(kept) == {"WANDB_API_KEY": KEY} and kept.stat().st_mode & 0o777 == 0o600
    assert KEY not in claimed.spec_path.read_text() and list((root / "queue").iterdir()) == []


def test_a_name_missing_from_the_submitting_shell_is_an_error_and_nothing_is_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "toy.yaml"
    spec.write_text(SPEC)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert main(["--root", str(tmp_path / "root"), "submit", "--no-preflight", str(spec)]) == 1
    err = capsys.readouterr().err
    assert f"{spec}: pass_env: WANDB_API_KEY not set in this shell" in err
    assert not list((tmp_path / "root" / "queue").glob("*"))


def test_a_spec_dropped_by_hand_cannot_name_pass_env(tmp_path: Path) -> None:
    intake = intake_of(tmp_path)
    (intake.queue_dir / "toy.yaml").write_text(SPEC)
    claimed, [rejected] = intake.scan()
    assert claimed == []
    assert (
        "pass_env: WANDB_API_KEY: values are taken from the shell that runs `shepherd submit`"
        in (rejected.errors[0])
    )


def test_a_rejected_specs_values_are_not_kept(tmp_path: Path) -> None:
    intake = intake_of(tmp_path)
    queued = intake.queue_dir / "toy-20261127-080000-abcd.yaml"
    keep_pass_env(queued, {"WANDB_API_KEY": KEY})
    queued.write_text(SPEC + "slurm: {gpus: 2}\n")  # an unknown key: rejected
    _, [rejected] = intake.scan()
    assert rejected.errors and not pass_env_sidecar(queued).exists()
    assert all(KEY not in p.read_text() for p in intake.rejected_dir.iterdir())
    assert sorted(os.listdir(intake.queue_dir)) == []
