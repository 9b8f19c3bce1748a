"""`status RUN` and `report` show Young/Daly's checkpoint interval beside the one in use, from a run's history
in the store and its checkpoint dir, and say "not measured yet" where the history is too thin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.act import interval
from supervisor.cli.main import main
from supervisor.decide.interval import Exposure, advise
from supervisor.domain.runs import RunState
from supervisor.report.interval import optimum_text
from supervisor.store import Store
from tests.support.failures import HOUR, Clock, failed_hours

RUN = "tuned-20261127-000000-abcd"
CALM = "calm-20261127-000000-abcd"
T0 = 1_800_000_000.0


def checkpoints(ck: Path, steps: list[int]) -> None:
    for s in steps:
        (ck / f"step_{s}").mkdir(parents=True)
        (ck / f"step_{s}" / "training_info.json").write_text(json.dumps({"step": s}))


def write_history(root: Path, ck: Path) -> None:
    """Three attempts of RUN each fail after an hour of 10-s steps; CALM ran an hour without a failure."""
    clock = Clock(T0)
    store = Store(root / "state" / "shepherd.sqlite3", clock=clock)
    spec = {
        "name": "tuned",
        "command": ["python", "run_grpo.py", "checkpointing.save_period=10"],
        "checkpoint": {"dir": str(ck), "tune_interval": True},
    }
    store.create_run(RUN, "tuned", json.dumps(spec), "/x")
    failed_hours(store, clock, RUN, 3)
    store.set_run_state(RUN, RunState.BACKOFF, next_action_at=clock.now + 60)
    calm = {"name": "calm", "command": ["python", "t.py"], "checkpoint": {"dir": str(ck.parent / "calm")}}
    store.create_run(CALM, "calm", json.dumps(calm), "/x")
    store.begin_attempt(CALM, lambda n: f"c{n}", {"ckpt_step_at_submit": None})
    store.attempt_submitted(CALM, 1, "201")
    store.observe_attempt(CALM, 1, slurm_state="RUNNING", reason=None, nodes="n2", started=True)
    clock.now += HOUR
    store.observe_attempt(CALM, 1, slurm_state="COMPLETED", reason=None, nodes="n2", exit_code=0, ended=True)
    store.close()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ck = tmp_path / "ck"
    checkpoints(ck, [20, 40])
    # The file timing is tested on real dirs in tests/act/test_interval.py; here every save took a minute.
    monkeypatch.setattr(interval, "timed_saves", lambda dirs: [60.0 for _ in dirs])
    write_history(tmp_path / "root", ck)
    return tmp_path / "root"


def test_status_shows_young_daly_beside_the_interval_in_use(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(root), "status", RUN]) == 0
    out = capsys.readouterr().out
    assert "interval  in use: every 10 steps = 1m40s at 10.0s/step" in out
    # sqrt(2 x 60 s x 1 h) = 657 s = 66 steps of 10 s.
    assert "Young/Daly: 66 steps = 10m57s from a 1m00s save (median of 2) and a 1h00m MTBF" in out
    assert "this run's: 3 failures in 3h00m of running" in out
    # 66 would orphan the kept step_20 and step_40: 20 divides both.
    assert "next attempt: checkpointing.save_period=20 (66 would leave kept step_20, step_40" in out


def test_a_run_without_failures_borrows_the_clusters_rate_and_says_what_is_not_measured(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(root), "status", CALM, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["checkpoint_interval"]
    assert d["failures"] == {"run": 0, "cluster": 3}
    # 3 failures in 4 node-hours over all runs: one per 80 min on this one-node run.
    assert d["mtbf_source"] == "cluster" and d["mtbf_s"] == pytest.approx(4 * HOUR / 3)
    assert d["young_daly_s"] is None and d["next_save_period"] is None
    assert d["lines"][1] == "Young/Daly: not measured yet (no save timed yet)"


def test_too_few_failures_anywhere_is_said_not_guessed() -> None:
    a = advise([60.0], 10.0, Exposure(1, HOUR), Exposure(2, 5 * HOUR), nodes=1, period=10)
    assert optimum_text(a) == (
        "Young/Daly: not measured yet (1 failure(s) in 1h00m of running here, 2 in all runs; 3 needed)"
    )


def test_the_report_shows_it_per_run_in_text_and_json(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(root), "report"]) == 0
    text = capsys.readouterr().out
    assert "  checkpoint interval Young/Daly: 66 steps = 10m57s" in text
    assert main(["--root", str(root), "report", "--json"]) == 0
    runs: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["runs"]
    by_id = {r["run"]: r["checkpoint_interval"] for r in runs}
    assert by_id[RUN]["young_daly_steps"] == 66 and by_id[RUN]["next_save_period"] == 20
    assert by_id[RUN]["mtbf_source"] == "run" and by_id[RUN]["interval_s"] == pytest.approx(100.0)
    assert by_id[CALM]["young_daly_s"] is None


def test_a_save_not_small_against_the_mtbf_is_flagged_as_first_order_only() -> None:
    a = advise([60.0], 10.0, Exposure(3, 3 * 300.0), None, nodes=1, period=10)  # 1-min saves, 5-min MTBF
    assert optimum_text(a).endswith("; first-order only: the save is not small against the MTBF)")


def test_saves_too_quick_for_the_timestamps_are_said_to_be_so() -> None:
    a = advise([0.0, 0.0], 10.0, Exposure(3, 3 * HOUR), None, nodes=1, period=10)
    assert optimum_text(a) == (
        "Young/Daly: not measured yet (the saves were quicker than the files' timestamps can tell)"
    )
