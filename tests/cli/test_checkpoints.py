"""`shepherd checkpoints RUN` lists what a run can resume from; `submit` queues a spec whose relative paths
start in the spec's folder, made absolute (issue #30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from supervisor.cli.main import main
from supervisor.store import Store


def test_checkpoints_shows_each_kept_step_its_metric_and_which_is_best_and_latest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, ck = tmp_path / "root", tmp_path / "ck"
    for step, accuracy in ((2, 0.5), (4, 0.25)):
        (ck / f"step_{step}").mkdir(parents=True)
        (ck / f"step_{step}" / "training_info.json").write_text(json.dumps({"val:accuracy": accuracy}))
    store = Store(root / "state" / "shepherd.sqlite3")
    spec = {"name": "toy", "command": ["t"], "checkpoint": {"dir": str(ck), "metric": "val:accuracy"}}
    store.create_run("toy-20261127-000000-abcd", "toy", json.dumps(spec), "/x")
    store.close()
    assert main(["--root", str(root), "checkpoints", "toy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["STEP", "VAL:ACCURACY", "DIR"]
    assert lines[1].split() == ["step_4", "0.25", "latest", str(ck)]
    assert lines[2].split() == ["step_2", "0.5", "best", str(ck)]
    assert main(["--root", str(root), "checkpoints", "toy", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["checkpoints"]
    assert [(r["name"], r["best"], r["latest"]) for r in rows] == [
        ("step_4", False, True),
        ("step_2", True, False),
    ]


def test_submit_from_another_folder_queues_the_specs_relative_paths_absolute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = tmp_path / "exp"
    (exp / "rules").mkdir(parents=True)
    (exp / "rules" / "mine.yaml").write_text("rules: []\n")
    (exp / "run.yaml").write_text(
        "name: toy\ncommand: [t, checkpointing.checkpoint_dir=ck]\nrules: {files: [rules/mine.yaml]}\n"
        "checkpoint: {metric: 'val:accuracy'}\nlog_dir: logs\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["--root", str(tmp_path / "root"), "submit", "--no-preflight", "exp/run.yaml"]) == 0
    run_id = capsys.readouterr().out.strip()
    queued = yaml.safe_load((tmp_path / "root" / "queue" / f"{run_id}.yaml").read_text())
    assert queued["rules"]["files"] == [str(exp / "rules" / "mine.yaml")]
    assert queued["log_dir"] == str(exp / "logs")
    assert queued["workdir"] == str(tmp_path)  # where submit ran, as before
    assert queued["checkpoint"]["dir"] == str(tmp_path / "ck")  # the command's, in the job's folder
