"""Job specs for the integration tests, written the one way they all share.

The Slurm tests each submit small spec files of the same shape (one CPU, ten minutes, a checkpoint dir ranked
by val:accuracy, an immediate resume that passes the checkpoint back) around a command, most often
tests/support/fake_failure.py. Writing that shape once here keeps the modules from drifting apart and keeps
one place that knows where a run's files lie: everything of run `name` is under tmp/name/ (ckpt/,
record.jsonl, rules.yaml) and its spec is tmp/name.yaml.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAKE = Path(__file__).resolve().parent / "fake_failure.py"
SLURM = "slurm: {cpus: 1, time: '00:10:00'}"
PASS_CHECKPOINT = "pass_checkpoint: ['--resume-from', '{checkpoint}']"


def fake_argv(tmp: Path, name: str, kind: str, *extra: str) -> list[str]:
    """fake_failure.py failing as `kind`, recording to tmp/name/record.jsonl, checkpointing to
    tmp/name/ckpt (created here)."""
    ck = tmp / name / "ckpt"
    ck.mkdir(parents=True, exist_ok=True)
    rec = tmp / name / "record.jsonl"
    return ["python", str(FAKE), kind, "--record", str(rec), "--checkpoint-dir", str(ck), *extra]


def records(tmp: Path, name: str) -> list[dict[str, Any]]:
    """What each attempt of fake_argv(tmp, name, ...) recorded, oldest first."""
    f = tmp / name / "record.jsonl"
    return [json.loads(line) for line in f.read_text().splitlines()] if f.exists() else []


def write_spec(
    tmp: Path,
    name: str,
    command: list[str],
    *,
    checkpoint: Path | None = None,
    checkpoint_arg: str = PASS_CHECKPOINT,
    resume: str = "",
    rules: str = "",
    use_default: bool | None = None,
    env: dict[str, str] | None = None,
    **top: object,
) -> Path:
    """Write tmp/name.yaml and return it.

    checkpoint: the run's checkpoint dir (created), tmp/name/ckpt unless given. checkpoint_arg: how a
    resumed attempt is told its checkpoint. resume: more `resume:` keys, YAML flow text ("max_attempts: 3").
    rules: the text of a rules file, written to tmp/name/rules.yaml; use_default, where given, goes with it.
    env: the job's environment. top: more top-level keys, each value written as its str().
    """
    ck = checkpoint or tmp / name / "ckpt"
    ck.mkdir(parents=True, exist_ok=True)
    lines = [
        f"name: {name}",
        f"command: {json.dumps(command)}",
        f"workdir: {tmp}",
        SLURM,
        f"checkpoint: {{dir: {ck}, metric: 'val:accuracy'}}",
        f"resume: {{backoff_s: 0, {checkpoint_arg}" + (f", {resume}" if resume else "") + "}",
    ]
    if rules:
        rf = tmp / name / "rules.yaml"
        rf.write_text(rules)
        default = "" if use_default is None else f", use_default: {str(use_default).lower()}"
        lines.append(f"rules: {{files: [{rf}]{default}}}")
    if env is not None:
        lines.append(f"env: {json.dumps(env)}")
    lines += [f"{k}: {v}" for k, v in top.items()]
    path = tmp / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path
