"""bench/goodput.py keeps running on Shepherd's real decision code: its last line is the JSON the README
quotes, every strategy's goodput is a fraction, and Shepherd's stall rule catches the silent hangs the
others wait out until the time limit; issue 31's strategies (in place, in place + spares, the ceiling) come
out of the code paths they claim, under both queue models, and the tuned ones checkpoint at the save period
Shepherd's own interval code passes."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
from itertools import islice
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from supervisor.decide.interval import (
    MIN_FAILURES,
    interval_steps,
    safe_save_period,
    young_daly_interval_s,
)
from supervisor.decide.plan import Resume
from supervisor.report.costs import AttemptFacts
from supervisor.rules.engine import load_ruleset

REPO = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("goodput_bench", REPO / "bench" / "goodput.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["goodput_bench"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


goodput = _bench()

TUNED = {"in_place_tuned", "in_place_spares_tuned"}
NEW = {"resubmit", "in_place", "in_place_spares", "ceiling"} | TUNED
RUNNER_POLL_S = 5.0  # the bench's default --runner-poll-s


@pytest.fixture(scope="module")
def bench() -> tuple[dict[str, Any], str]:
    """One run on a third of the campaign (the same MTBF): the whole one takes too long for the unit tier."""
    res = subprocess.run(
        [sys.executable, str(REPO / "bench" / "goodput.py"), "--no-save", "--scale", "0.3"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stdout


def test_the_goodput_benchmark_compares_the_three_strategies_on_the_real_decision_code(
    bench: tuple[dict[str, Any], str],
) -> None:
    last, stdout = bench
    lines = stdout.strip().splitlines()
    assert set(last["goodput"]) == {"human", "poller", "shepherd"}
    assert all(0 < g < 1 for g in last["goodput"].values())
    assert last["goodput"]["human"] < last["goodput"]["poller"]  # the same resumes, later
    assert 0 < last["shepherd_overhead_fraction_of_mtbf"] < 1
    assert isinstance(last["shepherd_best_goodput"], bool) and last["hang_detection"] == "learnt"
    assert "the shipped rollouts-stalled rule" in stdout
    # the learnt bound (learnt from the steps fed before each hang) beats the old fixed 30 minutes
    fixed = last["with_fixed_hang_bound"]
    assert fixed["bound_s"] == 1800 and fixed["goodput"] < last["goodput"]["shepherd"]
    (hang,) = [line.split() for line in lines if line.strip().startswith("hang ")]
    human, poller, shepherd = (float(x.replace(",", "")) for x in hang[2:5])
    assert shepherd < poller / 5 and shepherd < human / 5  # detected by the stall rule, not the time limit


def test_every_strategy_is_reported_under_both_queue_models_below_the_ceiling(
    bench: tuple[dict[str, Any], str],
) -> None:
    last, _ = bench
    for model in ("reservation", "shared_cluster"):
        goodput = last[model]["goodput"]
        assert set(goodput) == {"human", "poller", "shepherd"} | NEW
        assert all(0 < g < 1 for g in goodput.values())
        assert goodput["resubmit"] == goodput["shepherd"]  # today's Shepherd under its issue-31 name
        assert all(g <= goodput["ceiling"] for g in goodput.values())
        assert last[model]["ratio_to_ceiling"]["ceiling"] == 1.0
        # keeping the allocation never loses to going back through Slurm each time
        assert goodput["resubmit"] <= goodput["in_place"] <= goodput["in_place_spares"]
    # today's keys are the reservation's numbers; a shared cluster's queue costs every strategy
    assert {k: last["reservation"]["goodput"][k] for k in last["goodput"]} == last["goodput"]
    assert all(
        last["shared_cluster"]["goodput"][st] < last["reservation"]["goodput"][st]
        for st in last["reservation"]["goodput"]
    )
    assert last["shared_cluster"]["queue_wait_s_mean"] > 10 * last["reservation"]["queue_wait_s_mean"]
    goals = last["goals"]
    assert set(goals) == {
        "in_place_spares_vs_ceiling_shared_cluster",
        "in_place_spares_vs_ceiling_reservation",
        "shepherd_overhead_fraction_of_mtbf_max",
    }
    assert all(isinstance(g["met"], bool) for g in goals.values())
    # the same goals, said for each in-place strategy, tuned or not
    for name, goal in goals.items():
        by = last["goals_by_strategy"][name]
        assert set(by) == {"in_place", "in_place_spares"} | TUNED
        assert by["in_place_spares"]["met"] == goal["met"]


def test_restarts_in_place_pay_no_queue_and_go_through_slurm_when_the_fix_needs_another_allocation(
    bench: tuple[dict[str, Any], str],
) -> None:
    last, _ = bench
    for model in ("reservation", "shared_cluster"):
        restarted = last[model]["restarts_in_place"]
        # without spares: a GPU/HBM fault's fix excludes the node (another allocation); NODE_FAIL ends the job
        assert set(restarted["in_place"]) <= {"network", "software", "hang"}
        assert restarted["in_place"]["network"] > 0
        # with spares, GPU and HBM faults restart in place without the node; a host failure still resubmits
        assert restarted["in_place_spares"]["gpu"] > 0 and restarted["in_place_spares"]["hbm"] > 0
        assert "host" not in restarted["in_place_spares"]
        # the ceiling restarts every failure in place, host failures too
        assert restarted["ceiling"]["host"] > 0
        # a restart in place waits only for the runner's next look, never in Slurm's queue
        assert all(0 <= q <= RUNNER_POLL_S for q in last[model]["queue_s_max_in_place"].values())
    assert last["spare_nodes"] == math.ceil((196 + 72) / 54) + 1  # GPU/HBM faults per 24-h job, plus one
    assert last["reservation"]["spare_gpu_hours"] > 0


def _args(**kw: float) -> argparse.Namespace:
    return argparse.Namespace(**{"gpus": 16384, "days": 54.0, "time_limit_h": 24.0, **kw})


def test_idle_spare_gpus_count_as_lost_gpu_hours() -> None:
    one = AttemptFacts(1, 16384.0, 0.0, 0.0, 3600.0, 0, steps=((180, 3600.0),), training_at=0.0)
    plain = goodput.summarise(goodput.Outcome(attempts=[one], causes=["done"]), _args())
    spares = goodput.summarise(goodput.Outcome(attempts=[one], causes=["done"], spare_gpus=48.0), _args())
    assert plain["goodput"] == pytest.approx(1.0)
    assert spares["goodput"] == pytest.approx(16384 / (16384 + 48))
    assert spares["spare_gpu_hours"] == pytest.approx(48.0)


def test_a_restart_in_place_needs_a_running_job_and_no_other_allocation() -> None:
    may = goodput.can_restart_in_place
    resume = Resume("latest", 0.0, "budget allows")
    exclude = Resume("latest", 0.0, "budget allows", exclude_node=True)
    assert may(resume, job_running=True, spare_left=False, head_node=False)
    assert not may(resume, job_running=False, spare_left=True, head_node=False)  # NODE_FAIL, time limit
    assert not may(
        Resume("latest", 0.0, "", sbatch_args=("--mem=0",)),
        job_running=True,
        spare_left=True,
        head_node=False,
    )
    assert not may(exclude, job_running=True, spare_left=False, head_node=False)  # no spare left
    assert not may(exclude, job_running=True, spare_left=True, head_node=True)  # the driver's node
    assert may(exclude, job_running=True, spare_left=True, head_node=False)


def test_the_shared_clusters_queue_waits_are_seeded_lognormal_draws_around_their_median() -> None:
    shared = goodput.QueueModel("shared_cluster", 1200.0, 1.0)
    draws = list(islice(shared.waits(405), 4001))
    assert draws == list(islice(shared.waits(405), 4001))  # the same k-th wait for every strategy
    assert statistics.median(draws) == pytest.approx(1200.0, rel=0.1)
    reservation = goodput.QueueModel("reservation", 120.0)
    assert set(islice(reservation.waits(405), 10)) == {120.0}


def test_the_tuned_strategies_checkpoint_at_the_save_period_shepherds_interval_code_passes(
    bench: tuple[dict[str, Any], str],
) -> None:
    last, stdout = bench
    for model in ("reservation", "shared_cluster"):
        tuned = last[model]["tuned_interval"]
        assert set(tuned) == TUNED
        for st, t in tuned.items():
            assert t["command_period"] == 90  # the bench's 30 min in its 20-s steps, until Shepherd measures
            assert t["changes"], f"{st} never tuned its period"
            old = t["command_period"]
            for change in t["changes"]:
                assert change["old_period"] == old
                # measured once the run's own history holds enough failures (no cluster in a one-run store)
                assert change["failures"] >= MIN_FAILURES
                mtbf = change["running_s"] / change["failures"]
                target = interval_steps(young_daly_interval_s(t["save_s"], mtbf), t["step_s"])
                assert change["period"] == safe_save_period(target, old, change["kept_steps"])
                # never a period that orphans a kept step aligned to the old one
                assert all(s % change["period"] == 0 for s in change["kept_steps"] if s % old == 0)
                old = change["period"]
            assert t["period"] == old and t["interval_s"] == old * t["step_s"]
        # tuning changes the checkpoints, not where recoveries happen: still in place, never in Slurm's queue
        assert set(last[model]["restarts_in_place"]["in_place_tuned"]) <= {"network", "software", "hang"}
        assert all(q <= RUNNER_POLL_S for q in last[model]["queue_s_max_in_place"].values())
    assert "in_place_spares_tuned" in stdout.split("goals:")[1]  # the printed goals say which meets which


@pytest.mark.parametrize(
    ("nccl_timeout_s", "decided_by"), [(600.0, "rollouts-stalled"), (120.0, "nccl-error")]
)
def test_a_network_fault_is_decided_by_whichever_comes_first_the_stall_rule_or_nccls_watchdog(
    nccl_timeout_s: float, decided_by: str
) -> None:
    """A collective that lost its peer blocks until NCCL's watchdog: its steps stop at the fault, so the
    learnt stall bound (4.5 min at the least) decides first when the watchdog waits longer (its 10-min
    default), and the watchdog's line when it comes sooner."""
    args = goodput.arg_parser().parse_args(["--nccl-timeout-s", str(nccl_timeout_s)])
    events = [goodput.Event("network", 4 * 3600.0), goodput.Event("done", 3600.0)]
    out = goodput.simulate("shepherd", events, args, load_ruleset())
    failure = out.attempts[0].failure
    assert failure is not None and failure.rule == decided_by
    seen_after = failure.detected_at - failure.failed_at
    if decided_by == "rollouts-stalled":
        assert 270 <= seen_after < nccl_timeout_s
    else:
        assert seen_after >= nccl_timeout_s
