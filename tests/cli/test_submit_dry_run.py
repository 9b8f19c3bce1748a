"""`shepherd submit --dry-run SPEC`: the sbatch line, the job's environment with secret values masked, and
COMMAND; nothing queued."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.cli.main import main


def test_a_dry_run_prints_the_line_the_environment_and_command_and_queues_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / "secrets.env"
    env_file.write_text("WANDB_API_KEY=wandb-value-123456\nPLAIN_FROM_FILE=plainvalue99\n")
    env_file.chmod(0o600)
    monkeypatch.setenv("HF_TOKEN", "hf_passedvalue123456")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: toy\n"
        "command: [python, train.py, grpo.max_num_steps=6]\n"
        f"workdir: {tmp_path}\n"
        "slurm: {partition: gpu, time: '01:00:00', nodes: 2}\n"
        "env: {NCCL_DEBUG: INFO}\n"
        f"env_files: [{env_file}]\n"
        "pass_env: [HF_TOKEN]\n"
    )
    root = tmp_path / "root"
    assert main(["--root", str(root), "submit", "--dry-run", str(spec)]) == 0
    out = capsys.readouterr().out
    sbatch = next(line for line in out.splitlines() if " sbatch " in line)
    assert sbatch.startswith(f"cd {tmp_path} && sbatch --parsable --job-name=")
    assert "--nodes=2" in sbatch and "--partition=gpu" in sbatch and "--time=01:00:00" in sbatch
    assert "  NCCL_DEBUG=INFO" in out
    assert "  WANDB_API_KEY=***  (secret)" in out
    assert "  PLAIN_FROM_FILE=***  (secret)" in out  # every env file's value is a secret
    assert "  HF_TOKEN=***  (secret)" in out
    assert "  SHEPHERD_ATTEMPT=1" in out
    assert "COMMAND: python train.py grpo.max_num_steps=6" in out
    # As the daemon submits it: under the job-side runner, copied into the run's log folder at submission.
    assert "# the driver runs under Shepherd's job-side runner" in out
    assert sbatch.endswith("-runner.sh python train.py grpo.max_num_steps=6"), sbatch
    assert f" sh {root}/runs/toy-" in sbatch
    for value in ("wandb-value-123456", "plainvalue99", "hf_passedvalue123456"):
        assert value not in out
    assert not (root / "queue").exists() or not any((root / "queue").iterdir())


def test_a_dry_run_without_restart_in_place_shows_the_driver_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: toy\ncommand: [python, t.py]\nworkdir: {tmp_path}\nresume: {{in_place: false}}\n")
    assert main(["--root", str(tmp_path / "root"), "submit", "--dry-run", str(spec)]) == 0
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if " sbatch " in line).endswith(" t.py")
    assert "runner" not in out


def test_a_dry_run_of_a_bad_spec_is_refused_like_a_submit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: toy\ncommand: [echo]\nresume: {max_attemps: 3}\n")
    assert main(["--root", str(tmp_path / "root"), "submit", "--dry-run", str(spec)]) == 1
    assert "did you mean `max_attempts`?" in capsys.readouterr().err
