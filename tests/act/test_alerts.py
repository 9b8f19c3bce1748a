"""Alerts say what was done: the message people get agrees with the decision actually carried out (resumed
from step N, gave up because ..., held, alert only), whatever the rule's own text says about the cause.

The real act/actions.py on a real SQLite store; Slurm, the scheduler and the notice outlets are recording
fakes; the matches come from the real rules engine fed real shapes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.act.actions import Actions
from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import Notice
from supervisor.domain.observations import MetricEvent, StateEvent
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunState
from supervisor.rules.engine import Match, MatcherState, RuleSet, feed, load_ruleset
from supervisor.rules.replay import replay_text
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmUnavailable
from supervisor.slurm.parse import make_job_name
from supervisor.store import Store

NOW = 1_000_000.0


class FakeSlurm:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def cancel(self, job_id: str) -> None:
        self.calls.append(("cancel", job_id))

    async def hold(self, job_id: str) -> None:
        self.calls.append(("hold", job_id))

    async def release(self, job_id: str) -> None:
        self.calls.append(("release", job_id))

    async def job_nodes(self, job_id: str) -> str:
        return "node1"


class FakeScheduler:
    def __init__(self) -> None:
        self.scheduled: list[tuple[str, float, AttemptOverrides]] = []

    def schedule(self, run_id: str, *, at: float, overrides: AttemptOverrides, reason: str) -> None:
        self.scheduled.append((run_id, at, overrides))

    def wake(self) -> None:
        pass


class Sink:
    def __init__(self) -> None:
        self.notices: list[Notice] = []
        self.plots: list[tuple[str, str]] = []

    def publish(self, notice: Notice) -> None:
        self.notices.append(notice)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        self.plots.append((png, title))


class World:
    """One run with one submitted attempt (job 77) and the parts Actions acts through."""

    def __init__(
        self, tmp: Path, *, slurm_state: str = "RUNNING", overrides: dict[str, Any] | None = None, **spec: Any
    ) -> None:
        self.ckpt = tmp / "ckpt"
        self.ckpt.mkdir()
        self.store = Store(tmp / "s.sqlite3", clock=lambda: NOW)
        body = {
            "name": "r1",
            "command": ["true"],
            "checkpoint": {"dir": str(self.ckpt), "metric": "val:accuracy"},
            "resume": {"backoff_s": 0},
            **spec,
        }
        self.store.create_run("r1", "r1", json.dumps(body), str(tmp / "r1.yaml"))
        self.store.begin_attempt("r1", lambda n: make_job_name("r1", n), overrides or {})
        self.store.attempt_submitted("r1", 1, "77")
        self.store.observe_attempt("r1", 1, slurm_state=slurm_state, reason=None, nodes="node1", started=True)
        self.store.set_run_state("r1", RunState.RUNNING if slurm_state == "RUNNING" else RunState.PENDING)
        self.slurm, self.scheduler, self.sink = FakeSlurm(), FakeScheduler(), Sink()
        settings = Settings(root=tmp / "root")
        settings.ensure_dirs()
        self.actions = Actions(self.store, self.slurm, self.scheduler, self.sink, settings, clock=lambda: NOW)

    def checkpoint(self, step: int, accuracy: float) -> None:
        d = self.ckpt / f"step_{step}"
        d.mkdir()
        (d / "training_info.json").write_text(json.dumps({"step": step, "val:accuracy": accuracy}))

    def act(self, m: Match) -> Notice:
        run = self.store.get_run("r1")
        attempt = self.store.get_attempt("r1", 1)
        assert run is not None and attempt is not None
        anyio.run(self.actions.on_match, run, attempt, m)
        (notice,) = self.sink.notices
        return notice

    @property
    def state(self) -> RunState:
        run = self.store.get_run("r1")
        assert run is not None
        return run.state


def decided(rs: RuleSet, log: str) -> Match:
    *_, m = [m for m in replay_text(rs, log, st=MatcherState(run_id="r1", attempt=1)) if not m.followup]
    return m


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def test_a_resume_says_the_step_it_resumes_from_and_the_attempt(tmp_path: Path, rs: RuleSet) -> None:
    w = World(tmp_path)
    w.checkpoint(10, 0.4)
    w.checkpoint(20, 0.5)
    notice = w.act(decided(rs, "[rank0]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1970"))
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.checkpoint is not None and overrides.checkpoint.endswith("step_20")
    assert notice.kind == "resumed"
    assert notice.title.startswith("r1: NCCL failure: ")
    assert notice.title.endswith("— resuming from step 20 as attempt 2")
    assert ("cancel", "77") in w.slurm.calls


def test_a_time_limit_without_budget_says_it_gave_up_not_that_the_chain_continues(
    tmp_path: Path, rs: RuleSet
) -> None:
    w = World(tmp_path, resume={"backoff_s": 0, "max_attempts": 1})
    st = MatcherState(run_id="r1", attempt=1)
    (m,) = feed(rs, st, StateEvent("r1", 1, "77", JobState.TIMEOUT, at=NOW))
    notice = w.act(m)
    assert w.state == RunState.GAVE_UP and w.scheduler.scheduled == []
    assert notice.kind == "gave_up" and notice.needs_human
    assert notice.title.startswith("r1: time limit reached — gave up: retry budget spent")
    assert "continu" not in notice.title and "resuming" not in notice.title


def test_a_device_side_assert_gives_up_at_once_with_its_reason(tmp_path: Path, rs: RuleSet) -> None:
    w = World(tmp_path)
    w.checkpoint(10, 0.4)
    m = decided(rs, "[rank1]: RuntimeError: CUDA error: device-side assert triggered")
    notice = w.act(m)
    assert w.state == RunState.GAVE_UP and w.scheduler.scheduled == []
    assert "— gave up: a device-side assert is a data or indexing bug" in notice.title


HOLD_RULES = """
rules:
  - name: hold-on-reservation
    description: the job waits for a reservation that will not come
    retryable: false
    trigger: {kind: log, regex: "ReservationDeleted"}
    actions: [hold, {alert: {level: warning, message: "{run}: its reservation was deleted"}}]
"""


@pytest.mark.parametrize(("slurm_state", "said"), [("PENDING", "— held job 77"), ("RUNNING", "— not held")])
def test_a_hold_says_whether_it_held(tmp_path: Path, slurm_state: str, said: str) -> None:
    rules = tmp_path / "hold.yaml"
    rules.write_text(HOLD_RULES)
    w = World(tmp_path, slurm_state=slurm_state)
    notice = w.act(decided(load_ruleset([rules]), "slurm says: ReservationDeleted"))
    assert notice.title.startswith("r1: its reservation was deleted")
    assert said in notice.title
    if slurm_state == "PENDING":
        assert w.state == RunState.HELD and ("hold", "77") in w.slurm.calls
    else:
        assert w.state == RunState.RUNNING and w.slurm.calls == []
        assert notice.title.endswith("alert only: nothing was changed")


class UnreachableSlurm(FakeSlurm):
    """`scontrol hold` while slurmctld is down: SlurmUnavailable until `up`."""

    def __init__(self) -> None:
        super().__init__()
        self.up = False

    async def hold(self, job_id: str) -> None:
        self.calls.append(("hold", job_id))
        if not self.up:
            raise SlurmUnavailable("scontrol exited 1: Unexpected message received for job 77")


def test_a_rules_hold_while_slurm_is_unreachable_changes_nothing_and_is_retried(tmp_path: Path) -> None:
    rules = tmp_path / "hold.yaml"
    rules.write_text(HOLD_RULES)
    w = World(tmp_path, slurm_state="PENDING")
    w.slurm = w.actions.slurm = UnreachableSlurm()  # type: ignore[assignment]
    notice = w.act(decided(load_ruleset([rules]), "slurm says: ReservationDeleted"))
    assert "Slurm unreachable, the hold is retried" in notice.title
    assert w.state == RunState.PENDING and w.actions.holds_owed == {"r1": (1, "77", "hold-on-reservation")}
    anyio.run(w.actions.retry_owed_holds)  # still down: still owed, nothing changed
    assert w.state == RunState.PENDING and "r1" in w.actions.holds_owed
    w.slurm.up = True
    anyio.run(w.actions.retry_owed_holds)
    assert w.state == RunState.HELD and w.actions.holds_owed == {}
    assert w.slurm.calls == [("hold", "77")] * 3


def test_an_alert_only_rule_says_nothing_was_changed(tmp_path: Path, rs: RuleSet) -> None:
    w = World(tmp_path, slurm_state="PENDING")
    st = MatcherState(run_id="r1", attempt=1)
    feed(rs, st, StateEvent("r1", 1, "77", JobState.PENDING, reason="QOSMaxGRESPerUser", at=NOW))
    (m,) = feed(
        rs, st, StateEvent("r1", 1, "77", JobState.PENDING, reason="QOSMaxGRESPerUser", at=NOW + 3600)
    )
    notice = w.act(m)
    assert notice.kind == "alert"
    assert notice.title.startswith("r1: still pending: ") and "reason QOSMaxGRESPerUser" in notice.title
    assert notice.title.endswith("— alert only: nothing was changed")
    assert w.state == RunState.PENDING and w.scheduler.scheduled == [] and w.slurm.calls == []


def test_a_nan_rolls_back_to_the_best_checkpoint_before_the_divergence(tmp_path: Path, rs: RuleSet) -> None:
    w = World(tmp_path)
    w.checkpoint(2, 0.5)
    w.checkpoint(4, 0.7)  # the best before the divergence
    w.checkpoint(3, 0.6)
    w.checkpoint(6, 0.9)  # saved after it went bad (its accuracy means nothing), and the newest
    st = MatcherState(run_id="r1", attempt=1)
    out: list[Match] = []
    for step, loss in [(1, 0.9), (2, 0.7), (3, 0.6), (4, 0.55), (5, math.nan)]:
        out += feed(rs, st, MetricEvent("r1", 1, "train:loss", step, loss, at=NOW))
    (m,) = out
    notice = w.act(m)
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.checkpoint is not None and Path(overrides.checkpoint).name == "step_4"
    assert notice.title.startswith("r1: training diverged: train:loss = nan at step 5")
    assert notice.title.endswith("— resuming from step 4 as attempt 2")
    assert notice.excerpt is not None and "step 4: train:loss = 0.55" in notice.excerpt  # the history


def test_a_nan_with_nothing_saved_before_it_gives_up_instead_of_resuming_a_bad_checkpoint(
    tmp_path: Path, rs: RuleSet
) -> None:
    w = World(tmp_path)
    w.checkpoint(6, 0.9)
    st = MatcherState(run_id="r1", attempt=1)
    (m,) = feed(rs, st, MetricEvent("r1", 1, "train:loss", 5, math.inf, at=NOW))
    notice = w.act(m)
    assert w.state == RunState.GAVE_UP and w.scheduler.scheduled == []
    assert "— gave up: nan-loss at step 5: cannot roll back (no complete checkpoint before step 5)" in (
        notice.title
    )


def test_a_nan_seen_first_in_the_log_rolls_back_before_the_step_the_metrics_name(
    tmp_path: Path, rs: RuleSet
) -> None:
    logs = tmp_path / "logs"
    (logs / "exp_001").mkdir(parents=True)
    rows = [{"step": s, "train/loss": v} for s, v in [(1, 0.9), (2, 0.7), (3, 0.6), (4, 0.5), (5, math.nan)]]
    (logs / "exp_001" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = World(tmp_path, trainer_log_dir=str(logs))
    w.checkpoint(4, 0.7)
    w.checkpoint(6, 0.9)  # after the divergence: must not be chosen though it ranks best
    m = decided(rs, "2026-11-23 23:53:22 [info     ] Step 5/44   train/grad_norm=nan train/loss=nan")
    assert m.rule == "nan-loss" and m.evidence.step is None  # a log line names no step
    notice = w.act(m)
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.checkpoint is not None and Path(overrides.checkpoint).name == "step_4"
    assert notice.title.endswith("— resuming from step 4 as attempt 2")


def test_a_validation_regression_alerts_naming_the_best_checkpoint_and_changes_nothing(
    tmp_path: Path, rs: RuleSet
) -> None:
    w = World(tmp_path)
    w.checkpoint(10, 0.55)
    w.checkpoint(20, 0.71)  # the best
    w.checkpoint(30, 0.52)
    st = MatcherState(run_id="r1", attempt=1)
    out: list[Match] = []
    for step, acc in [(10, 0.55), (20, 0.71), (30, 0.52), (40, 0.50)]:
        out += feed(rs, st, MetricEvent("r1", 1, "val:accuracy", step, acc, at=NOW))
    (m,) = out
    notice = w.act(m)
    assert notice.kind == "alert" and w.state == RunState.RUNNING and w.scheduler.scheduled == []
    assert "validation regressed" in notice.title and "from its best 0.71" in notice.title
    assert "the best checkpoint to resume from is step_20 (val:accuracy 0.71)" in notice.title
    assert notice.title.endswith("— alert only: nothing was changed")


def test_a_completion_after_a_rollback_was_decided_does_not_complete_the_run(
    tmp_path: Path, rs: RuleSet
) -> None:
    """The job finished while its NaN rollback was being decided: the run waits for the next attempt (the
    scheduler has it in BACKOFF), so the old attempt's COMPLETED end is noted and ignored."""
    w = World(tmp_path)
    w.store.set_run_state("r1", RunState.BACKOFF)  # what the scheduler does with the rollback's resume
    ended = StateEvent("r1", 1, "77", JobState.COMPLETED, "", 0, None, "node1", at=NOW)
    (m,) = [m for m in feed(rs, MatcherState(run_id="r1", attempt=1), ended) if not m.followup]
    assert m.category == "completed"
    run, attempt = w.store.get_run("r1"), w.store.get_attempt("r1", 1)
    assert run is not None and attempt is not None
    anyio.run(w.actions.on_match, run, attempt, m)
    assert w.state == RunState.BACKOFF
    (d,) = w.store.decisions("r1")
    assert d.outcome == "ignored: the next attempt is already decided"


# ---- an end no rule claimed --------------------------------------------------------------------------------


def ended_unclaimed(w: World, state: JobState, exit_code: int = 1) -> Notice:
    w.store.observe_attempt("r1", 1, slurm_state=state.value, reason=None, nodes="node1", exit_code=exit_code,
                            ended=True)  # fmt: skip
    run, attempt = w.store.get_run("r1"), w.store.get_attempt("r1", 1)
    assert run is not None and attempt is not None
    anyio.run(w.actions.on_unmatched_end, run, attempt, state, exit_code)
    (notice,) = w.sink.notices
    return notice


def test_an_unrecognised_crash_after_a_new_checkpoint_resumes_once_from_it(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.checkpoint(20, 0.5)
    notice = ended_unclaimed(w, JobState.FAILED)
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.checkpoint is not None and overrides.checkpoint.endswith("step_20")
    assert notice.kind == "resumed" and not notice.needs_human
    assert "no rule recognised the failure; it saved step_20 first" in notice.title
    assert notice.title.endswith("— resuming from step 20 as attempt 2")
    (d,) = w.store.decisions("r1")
    assert (d.rule, d.action, d.signature) == ("unrecognised-failure", "resume", "unrecognised:FAILED")
    assert "budget 0/1 left" in d.outcome


def test_an_unrecognised_crash_without_a_new_checkpoint_waits_for_a_human(tmp_path: Path) -> None:
    w = World(tmp_path)
    notice = ended_unclaimed(w, JobState.FAILED)
    assert w.scheduler.scheduled == [] and w.state == RunState.FAILED
    assert notice.needs_human and "no rule recognised the failure" in notice.title


def test_an_unrecognised_crash_after_new_steps_of_its_own_resumes_once_from_the_same_checkpoint(
    tmp_path: Path,
) -> None:
    w = World(tmp_path, overrides={"ckpt_step_at_submit": 20})  # it was resumed from step_20
    w.checkpoint(20, 0.5)
    w.store.record_step("r1", 1, 26, NOW)
    notice = ended_unclaimed(w, JobState.FAILED)
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.checkpoint is not None and overrides.checkpoint.endswith("step_20")
    assert "it trained from step 20 to step 26 first" in notice.title and not notice.needs_human


def test_an_unrecognised_crash_before_its_first_new_step_waits_for_a_human(tmp_path: Path) -> None:
    w = World(tmp_path, overrides={"ckpt_step_at_submit": 20})
    w.checkpoint(20, 0.5)
    w.store.record_step("r1", 1, 20, NOW)  # only the step it resumed at: it never trained
    notice = ended_unclaimed(w, JobState.FAILED)
    assert w.scheduler.scheduled == [] and w.state == RunState.FAILED and notice.needs_human


def test_a_cancel_nobody_here_asked_for_is_never_resumed_even_after_progress(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.checkpoint(20, 0.5)
    notice = ended_unclaimed(w, JobState.CANCELLED, exit_code=0)
    assert w.scheduler.scheduled == [] and w.state == RunState.FAILED and notice.needs_human


def test_a_spec_can_keep_every_unrecognised_crash_for_a_human(tmp_path: Path) -> None:
    w = World(tmp_path, resume={"backoff_s": 0, "unrecognised_after_progress": False})
    w.checkpoint(20, 0.5)
    notice = ended_unclaimed(w, JobState.FAILED)
    assert w.scheduler.scheduled == [] and notice.needs_human


def test_an_unrecognised_resume_a_crash_interrupted_is_carried_out_at_the_restart(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.checkpoint(20, 0.5)
    w.store.observe_attempt(
        "r1", 1, slurm_state="FAILED", reason=None, nodes="node1", exit_code=1, ended=True
    )
    policy = {"category": "failure", "retryable": True, "max_retries": 1, "ckpt_after": 20}
    w.store.record_decision("r1", 1, rule="unrecognised-failure", action="resume",
                            signature="unrecognised:FAILED", reason="attempt 1 ended FAILED; resuming once",
                            evidence={"state": "FAILED", "policy": policy})  # fmt: skip
    assert anyio.run(w.actions.finish_unfinished) == 1
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.checkpoint is not None and overrides.checkpoint.endswith("step_20")
    (d,) = w.store.decisions("r1")
    assert "resuming from step_20" in d.outcome


class AddressedSlurm(FakeSlurm):
    """A job on eight nodes whose Slurm says which node has which address."""

    async def job_nodes(self, job_id: str) -> str:
        return "node[1-8]"

    async def node_at(self, address: str, nodelist: str) -> str | None:
        return {"10.0.0.7": "node7"}.get(address)


@pytest.mark.parametrize(("address", "excluded"), [("10.0.0.7", ("node7",)), ("10.0.0.99", ())])
def test_a_gpu_fault_named_by_a_workers_address_excludes_its_node_never_the_address(
    tmp_path: Path, rs: RuleSet, address: str, excluded: tuple[str, ...]
) -> None:
    w = World(tmp_path)
    w.store.observe_attempt("r1", 1, slurm_state="RUNNING", reason=None, nodes="node[1-8]")
    w.actions.slurm = AddressedSlurm()
    w.checkpoint(20, 0.5)
    line = f"(RayWorkerWrapper pid=9, ip={address}) RuntimeError: CUDA error: uncorrectable ECC error"
    notice = w.act(decided(rs, line))
    ((_, _, overrides),) = w.scheduler.scheduled
    assert overrides.exclude == excluded  # an address sbatch would refuse is never passed on
    assert notice.kind == "resumed"
    assert ("which the next attempt excludes" in notice.text) == bool(excluded)
