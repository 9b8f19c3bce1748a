"""The CLI's own behaviour: submit validates before queueing, status shows silences, errors exit non-zero."""

import json
from pathlib import Path

import pytest

from supervisor.cli.common import CliError, open_store
from supervisor.cli.main import main
from supervisor.settings import Settings
from supervisor.store import Store


def test_submit_refuses_a_bad_spec_and_queues_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncommand: [echo]\nslurm: {gpus: 2}\n")
    assert main(["--root", str(tmp_path / "root"), "submit", str(bad)]) == 1
    assert "bad.yaml:3: slurm.gpus: unknown key" in capsys.readouterr().err
    assert not any((tmp_path / "root" / "queue").glob("*.yaml"))


def test_submit_queues_atomically_under_the_printed_run_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("name: toy\ncommand: [echo, hi]\n")
    assert main(["--root", str(tmp_path / "root"), "submit", str(good)]) == 0
    run_id = capsys.readouterr().out.strip()
    queued = tmp_path / "root" / "queue" / f"{run_id}.yaml"
    assert queued.exists() and "workdir:" in queued.read_text()  # defaults to where it was submitted


def test_a_silence_is_listed_in_status_and_unknown_runs_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    store = Store(root / "state" / "shepherd.sqlite3")
    store.create_run("toy-20261121-000000-abcd", "toy", '{"name": "toy", "command": ["echo"]}', "/x")
    store.close()
    assert main(["--root", str(root), "silence", "toy", "2h"]) == 0
    assert main(["--root", str(root), "silence", "ghost", "2h"]) == 1
    capsys.readouterr()
    assert main(["--root", str(root), "status", "--json", "toy"]) == 0
    detail = json.loads(capsys.readouterr().out)
    assert [s["target"] for s in detail["silences"]] == ["toy-20261121-000000-abcd"]


def test_unknown_run_gives_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path), "cancel", "ghost"]) == 1
    assert "no run called 'ghost'" in capsys.readouterr().err


def test_plot_draws_the_png_slack_would_post_and_says_when_there_is_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, logs = tmp_path / "root", tmp_path / "logs"
    (logs / "exp_001").mkdir(parents=True)
    (logs / "exp_001" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "train/reward_mean": 0.1 * s}) + "\n" for s in range(5))
    )
    store = Store(root / "state" / "shepherd.sqlite3")
    spec = {"name": "toy", "command": ["echo"], "trainer_log_dir": str(logs)}
    store.create_run("toy-20261121-000000-abcd", "toy", json.dumps(spec), "/x")
    store.create_run("bare-20261121-000000-abcd", "bare", '{"name": "bare", "command": ["echo"]}', "/x")
    store.close()
    out = tmp_path / "curves.png"
    assert main(["--root", str(root), "plot", "toy", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and capsys.readouterr().out.strip() == str(out)
    assert main(["--root", str(root), "plot", "bare", "-o", str(tmp_path / "b.png")]) == 1
    assert "has no metrics yet" in capsys.readouterr().err
    assert main(["--root", str(root), "plot", "ghost", "-o", str(tmp_path / "g.png")]) == 1
    assert "no run called 'ghost'" in capsys.readouterr().err


def test_the_cli_reads_the_store_but_never_writes_it_beside_the_daemon(tmp_path: Path) -> None:
    store = open_store(Settings(root=tmp_path / "root"))
    assert store.list_runs() == []
    with pytest.raises(CliError, match="only reads"):
        store.create_run("toy-20261124-000000-abcd", "toy", '{"name": "toy", "command": ["true"]}', "/x")
    assert store.list_runs() == []
