"""The CLI's own behaviour: submit validates before queueing, status shows silences and a hang's stacks,
errors exit non-zero."""

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from supervisor.act.forensics import JobForensics
from supervisor.cli.common import CliError, open_store
from supervisor.cli.main import main
from supervisor.settings import Settings
from supervisor.slurm.parse import make_job_name
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


def test_status_and_logs_show_the_stacks_taken_before_a_hang_was_cancelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    store = Store(root / "state" / "shepherd.sqlite3")
    run_id = "toy-20261121-000000-abcd"
    store.create_run(run_id, "toy", '{"name": "toy", "command": ["echo"]}', "/x")
    store.begin_attempt(run_id, lambda n: make_job_name("toy", n), {})
    store.attempt_submitted(run_id, 1, "77")
    run, attempt = store.get_run(run_id), store.get_attempt(run_id, 1)
    assert run is not None and attempt is not None
    assert main(["--root", str(root), "logs", "toy", "--source", "forensics"]) == 1
    assert "no forensics for toy-20261121-000000-abcd" in capsys.readouterr().err
    frame = {"name": "hang_forever", "filename": "/w/trainer/faults.py", "line": 197}
    answer = {
        "node": "node1",
        "processes": [
            {
                "pid": 5,
                "cmdline": ["python", "-m", "trainer"],
                "method": "py-spy",
                "threads": [{"pid": 5, "os_thread_id": 5, "frames": [frame]}],
            }
        ],
        "ray_status": "Active:\n 1 node_abc",
    }

    class Node:
        async def job_nodes(self, job_id: str) -> str:
            return "node1"

        async def hostnames(self, nodelist: str) -> list[str]:
            return [nodelist]

        async def run_in_job(
            self, job_id: str, node: str, argv: list[str], *, timeout_s: float
        ) -> subprocess.CompletedProcess[bytes]:
            return subprocess.CompletedProcess(argv, 0, json.dumps(answer).encode(), b"")

    collector = JobForensics(Node(), root / "runs")
    anyio.run(collector.capture, run, attempt, "rollouts-stalled: no progress for 4.5 min in step at step 50")
    store.close()

    assert main(["--root", str(root), "status", "toy"]) == 0
    out = capsys.readouterr().out
    assert "forensics 1 process(es) (1 by py-spy); 1 of 1 driver wait in hang_forever (faults.py:197)" in out
    assert "--source forensics" in out
    assert main(["--root", str(root), "logs", "toy", "--source", "forensics"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1] == "rollouts-stalled: no progress for 4.5 min in step at step 50"
    assert "hang_forever (faults.py:197)  [/w/trainer/faults.py]" in out
    assert "== ray_status (node1)\nActive:" in out
