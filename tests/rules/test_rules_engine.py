"""The matcher: traceback grouping, priorities, one incident -> one decision, chunk scanning, durable state."""

# ruff: noqa: E501
# (real log lines are long; their shapes matter more than the width)

from __future__ import annotations

import math

import pytest

from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import LogEvent, MetricEvent, StateEvent, Tick
from supervisor.rules.engine import (
    Match,
    MatcherState,
    RuleSet,
    candidate_positions,
    compile_rules,
    evaluate,
    feed,
    feed_lines,
    flush,
    load_ruleset,
    normalise_signature,
    scan_lines,
    scan_text,
)
from supervisor.rules.literals import derive_literals
from supervisor.rules.loader import load_rules_text


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def run(rs: RuleSet, log: str, source: str = "ray-driver.log") -> list[Match]:
    st = MatcherState(run_id="r1", attempt=1)
    out = feed_lines(rs, st, source, list(enumerate(log.split("\n"), start=1)))
    return out + flush(rs, st)


def primaries(ms: list[Match]) -> list[Match]:
    return [m for m in ms if not m.followup]


CHAINED = """INFO step 12 done
Traceback (most recent call last):
  File "/opt/nemo_rl/models/generation/vllm.py", line 301, in generate
    out = self.llm.generate(prompts)
KeyError: 'request_id'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/opt/nemo_rl/algorithms/grpo.py", line 512, in grpo_train
    batch = policy.generate(data)
ray.exceptions.RayTaskError(OutOfMemoryError): ray::VllmGenerationWorker.generate() (pid=1, ip=10.0.0.3)
  File "/opt/nemo_rl/models/generation/vllm_worker.py", line 88, in generate
    raise
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.
INFO shutting down"""


def test_chained_traceback_is_one_event_with_the_cause_inside_the_ray_wrapper(rs: RuleSet) -> None:
    ms = run(rs, CHAINED)
    (m,) = primaries(ms)
    assert m.rule == "cuda-oom"
    assert m.evidence.first_line == 2
    assert m.evidence.lines[0] == "Traceback (most recent call last):"
    assert any("During handling" in ln for ln in m.evidence.lines)
    assert m.line == 12  # the wrapper line holds the match
    assert m.node == "10.0.0.3"


def test_direct_cause_chain_is_grouped(rs: RuleSet) -> None:
    log = """Traceback (most recent call last):
  File "a.py", line 1, in f
    g()
torch.OutOfMemoryError: CUDA out of memory.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "b.py", line 2, in h
    f()
RuntimeError: training step failed"""
    st = MatcherState(run_id="r1", attempt=1)
    ms = feed_lines(rs, st, "a.log", list(enumerate(log.split("\n"), start=1)))
    # decided as soon as the first exception line arrived; the chain keeps being absorbed into the same event
    assert [m.rule for m in ms] == ["cuda-oom"] and ms[0].evidence.first_line == 1
    assert st.tracebacks["a.log"][0].line_nos == list(range(1, 12))
    assert flush(rs, st) == []


def test_exception_type_only_on_the_last_line_still_fires(rs: RuleSet) -> None:
    log = "\n".join(
        ["Traceback (most recent call last):"]
        + [f'  File "/opt/x{i}.py", line {i}, in f{i}\n    call{i}()' for i in range(30)]
        + ["ncclInternalError: Internal check failed."]
    )
    (m,) = primaries(run(rs, log))
    assert m.rule == "nccl-error" and m.line == 62


def test_vllm_engine_dead_printed_before_the_engine_traceback_is_superseded_by_the_root_cause(
    rs: RuleSet,
) -> None:
    log = """ERROR 11-21 10:00:01 [async_llm.py:420] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an \
issue. See stack trace (above) for the root cause.
ERROR 11-21 10:00:01 [core.py:588] EngineCore hit an exception:
Traceback (most recent call last):
  File "/opt/vllm/v1/engine/core.py", line 580, in run_engine_core
    engine_core.run_busy_loop()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."""
    ms = primaries(run(rs, log))
    assert [m.rule for m in ms] == ["vllm-engine-dead", "cuda-oom"]
    assert ms[1].supersedes == ("vllm-engine-dead",)


def test_hardware_error_inside_nccl_watchdog_message_is_hardware(rs: RuleSet) -> None:
    log = (
        "[rank2]:[E ProcessGroupNCCL.cpp:1182] [Rank 2] NCCL watchdog thread terminated with exception: CUDA error: "
        "an illegal memory access was encountered"
    )
    (m,) = run(rs, log)
    assert m.rule == "cuda-hardware-error"


def test_hardware_error_after_an_nccl_error_supersedes_it_one_decision_in_the_end(rs: RuleSet) -> None:
    log = """[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)
[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)
[Thu Nov 21 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 48, pid=0, DBE (double bit error) ECC error
[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"""
    ms = run(rs, log)
    ps = primaries(ms)
    assert [m.rule for m in ps] == ["nccl-error", "cuda-hardware-error"]
    assert ps[1].supersedes == ("nccl-error",)
    assert all(m.followup for m in ms if m not in ps)


def test_one_incident_one_match_for_repeated_lines_and_ranks(rs: RuleSet) -> None:
    line = (
        "[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4012, OpType=BROADCAST) ran for 600054 milliseconds before timing out. "
        "[repeated 15x across cluster]"
    )
    log = "\n".join(line.format(r=r) for r in range(64))
    ms = run(rs, log)
    assert len(ms) == 1 and ms[0].rule == "nccl-error"


def test_node_failure_inhibits_the_nccl_errors_it_caused(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    ms = feed(rs, st, StateEvent("r1", 1, "9", JobState.NODE_FAIL, nodes="node3", at=10.0))
    assert [m.rule for m in ms] == ["node-failure"]
    later = feed_lines(rs, st, "ray-driver.log", [(5, "ncclRemoteError: remote process exited")], at=11.0)
    assert len(later) == 1 and later[0].followup and later[0].inhibited_by == "node-failure"
    assert later[0].actions == ()


def test_time_limit_after_kill_noise_still_decides(rs: RuleSet) -> None:
    log = """slurmstepd: error: *** JOB 4242 ON node1 CANCELLED AT 2026-11-21T10:00:00 DUE TO TIME LIMIT ***
ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.
[rank0]:[E ProcessGroupNCCL.cpp:1182] [Rank 0] NCCL communicator was aborted on rank 0."""
    ms = run(rs, log)
    assert [m.rule for m in primaries(ms)] == ["slurm-time-limit"]
    assert primaries(ms)[0].node == "node1"


def test_completed_job_is_never_resumed_by_earlier_noise(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    ms = feed_lines(rs, st, "ray-driver.log", [(1, "ray.exceptions.ActorDiedError: The actor died")], at=1.0)
    assert ms[0].rule == "ray-actor-died"
    (done,) = feed(rs, st, StateEvent("r1", 1, "9", JobState.COMPLETED, exit_code=0, at=30.0))
    assert done.rule == "run-completed" and done.supersedes == ("ray-actor-died",)


def test_incident_window_lets_a_new_incident_fire_later(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    line = [(1, "ncclInternalError: Internal check failed.")]
    assert len(feed_lines(rs, st, "a.log", line, at=0.0)) == 1
    assert feed_lines(rs, st, "a.log", line, at=300.0) == []
    assert len(feed_lines(rs, st, "a.log", line, at=700.0)) == 1


def test_interleaved_rank_tracebacks_group_by_prefix(rs: RuleSet) -> None:
    log = """[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File "train.py", line 10, in step
[rank1]:   File "train.py", line 10, in step
[rank0]:     loss.backward()
[rank1]:     loss.backward()
[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
[rank1]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"""
    ms = run(rs, log)
    oom = next(m for m in ms if m.rule == "cuda-oom")
    assert all(ln.startswith("[rank0]:") for ln in oom.evidence.lines)
    assert oom.evidence.first_line == 1 and oom.line == 7
    assert [m.rule for m in primaries(ms)] == ["cuda-oom"]  # the NCCL error is part of the same incident


def test_traceback_is_decided_when_its_exception_line_arrives(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    lines = [
        (1, "Traceback (most recent call last):"),
        (2, '  File "x.py", line 1, in f'),
        (3, "torch.OutOfMemoryError: CUDA out of memory."),
    ]
    ms = feed_lines(rs, st, "a.log", lines, at=1.0)
    assert [m.rule for m in ms] == ["cuda-oom"]  # no need to wait for the next line or a tick


def test_unfinished_traceback_is_flushed_on_an_idle_tick(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    feed_lines(
        rs, st, "a.log", [(1, "Traceback (most recent call last):"), (2, '  File "x.py", line 1')], at=1.0
    )
    assert feed(rs, st, Tick(1.5)) == []
    assert st.tracebacks
    feed(rs, st, Tick(10.0))
    assert not st.tracebacks


def _hyperscan_modes() -> list[bool]:
    try:
        import hyperscan  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return [False]
    return [False, True]


@pytest.mark.parametrize("use_hyperscan", _hyperscan_modes())
def test_scan_text_matches_feed_lines_and_survives_chunk_boundaries(rs: RuleSet, use_hyperscan: bool) -> None:
    filler = [f"INFO step {i}: loss=0.1 reward=0.5" for i in range(200)]
    nccl = "node7:1:2 [0] NCCL INFO NET/IB : No device found."
    lines = [
        *filler[:50],
        nccl,
        *CHAINED.split("\n"),
        *filler[50:120],
        "slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2026-11-21T10:00:00 DUE TO PREEMPTION ***",
        *filler[120:],
    ]
    text = "\n".join(lines) + "\n"
    expected = [(m.rule, m.line, m.followup) for m in run(rs, "\n".join(lines))]
    assert ("cuda-oom", 63, False) in expected

    for cut_line in (0, 53, 58, 62, 63, 64, 150):
        st = MatcherState(run_id="r1", attempt=1)
        head = "".join(ln + "\n" for ln in lines[:cut_line])
        tail = "".join(ln + "\n" for ln in lines[cut_line:])
        got = scan_text(rs, st, head, "ray-driver.log", 1, use_hyperscan=use_hyperscan)
        got += scan_text(rs, st, tail.encode(), "ray-driver.log", cut_line + 1, use_hyperscan=use_hyperscan)
        got += flush(rs, st)
        assert [(m.rule, m.line, m.followup) for m in got] == expected, cut_line
    st = MatcherState(run_id="r1", attempt=1)
    got = scan_text(rs, st, text, "ray-driver.log", use_hyperscan=use_hyperscan) + flush(rs, st)
    assert [(m.rule, m.line, m.followup) for m in got] == expected


@pytest.mark.parametrize("use_hyperscan", _hyperscan_modes())
def test_prefilter_paths_find_the_same_lines(rs: RuleSet, use_hyperscan: bool) -> None:
    data = (
        "INFO ok\n" * 50 + "x ncclSystemError y\nINFO ok\nslurmstepd: oom-kill event(s) in step 1\n"
    ).encode()
    lines = {data.count(b"\n", 0, h) for h in candidate_positions(rs, data, use_hyperscan=use_hyperscan)}
    assert lines == {50, 52}


def test_scan_text_resolves_carriage_return_splices(rs: RuleSet) -> None:
    text = (
        "Collecting rollouts:  20%|##  | 410/2048\rCollecting rollouts:  21%|##  | 428/2048 [02:01<05:42, 4.73it/s]"
        "\r[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout\nINFO x\n"
    )
    (m,) = scan_text(rs, MatcherState(), text, "slurm-1.out", 41)
    assert m.rule == "nccl-error" and m.line == 41


def test_state_round_trip_prevents_refiring_after_a_restart(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=2)
    assert feed_lines(rs, st, "a.log", [(1, "ncclSystemError: socket")], at=5.0)
    restored = MatcherState.from_dict(st.to_dict())
    assert feed_lines(rs, restored, "a.log", [(2, "ncclSystemError: socket")], at=6.0) == []
    assert restored.attempt == 2 and restored.incident is not None


def test_evaluate_is_pure(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    ev = LogEvent("r1", 1, "a.log", 3, ("ncclSystemError: socket",), 1.0)
    new, ms = evaluate(rs, st, ev)
    assert [m.rule for m in ms] == ["nccl-error"]
    assert st.fired == {} and "nccl-error" in new.fired
    # a pre-grouped multi-line event from the tailer is one event
    _, ms2 = evaluate(
        rs,
        MatcherState(),
        LogEvent(
            "r1",
            1,
            "a.log",
            1,
            ("Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out"),
            1.0,
        ),
    )
    assert [m.rule for m in ms2] == ["cuda-oom"]


def test_signature_ignores_numbers_and_ray_repeat_suffix() -> None:
    a = normalise_signature(
        "Watchdog ran for 600054 milliseconds (SeqNum=4012) [repeated 15x across cluster]"
    )
    b = normalise_signature("Watchdog ran for 600101 milliseconds (SeqNum=77)")
    assert a == b


METRIC_RULES = """
rules:
  - name: reward-nan
    trigger: {kind: metric, tag: "train/reward*", condition: nan}
    actions: [{alert: {level: error}}, give_up]
    retryable: false
  - name: val-drop
    priority: 60
    trigger: {kind: metric, tag: val/accuracy, condition: drop_from_best, threshold: 0.2}
    actions: [{alert: {}}]
"""


def test_metric_triggers_nan_and_drop_from_best() -> None:
    doc = load_rules_text(METRIC_RULES, "m.yaml")
    rs = compile_rules(doc.rules)
    st = MatcherState(run_id="r1", attempt=1)
    assert feed(rs, st, MetricEvent("r1", 1, "train/reward_mean", 1, 0.4, at=1.0)) == []
    (m,) = feed(rs, st, MetricEvent("r1", 1, "train/reward_mean", 2, math.nan, at=2.0))
    assert m.rule == "reward-nan" and m.action_names == ("alert", "give_up")
    for step, v in [(1, 0.5), (2, 0.7), (3, 0.6)]:
        assert feed(rs, st, MetricEvent("r1", 1, "val/accuracy", step, v, at=3.0)) == []
    (d,) = feed(rs, st, MetricEvent("r1", 1, "val/accuracy", 4, 0.45, at=4.0))
    assert d.rule == "val-drop" and "best 0.7" in d.reason


def test_derived_literals_cover_each_alternative() -> None:
    assert derive_literals(r"CUDA out of memory|torch\.OutOfMemoryError") == [
        "CUDA out of memory",
        "torch.OutOfMemoryError",
    ]
    assert derive_literals(r"(?i)cuda") is None
    assert derive_literals(r"a.b|cde") is None
    assert derive_literals(r"NCCL WARN .*failed") == ["NCCL WARN "]


def test_rule_without_literals_still_matches_in_chunks() -> None:
    doc = load_rules_text(
        "rules:\n  - name: loss-spike\n    trigger: {kind: log, regex: '(?i)loss=\\d{3,}'}\n    actions: [{alert: {}}]\n",
        "x.yaml",
    )
    rs = compile_rules(doc.rules)
    assert rs.unfiltered
    (m,) = scan_text(rs, MatcherState(), "INFO loss=0.1\nINFO LOSS=1234\n", "a.log")
    assert m.rule == "loss-spike" and m.line == 2


def test_scan_lines_puts_stripped_prefixes_back_for_interleaved_ranks(rs: RuleSet) -> None:
    texts = [
        "Traceback (most recent call last):",
        "Traceback (most recent call last):",
        '  File "train.py", line 10, in step',
        '  File "train.py", line 10, in step',
        "torch.OutOfMemoryError: CUDA out of memory.",
        "ValueError: bad sample",
    ]
    prefixes = {
        i: "(Worker pid=1, ip=10.0.0.1)" if i % 2 == 0 else "(Worker pid=2, ip=10.0.0.2)" for i in range(6)
    }
    ms = scan_lines(rs, MatcherState(), texts, "ray-driver.log", 100, prefixes=prefixes)
    (m,) = ms
    assert m.rule == "cuda-oom" and m.node == "10.0.0.1" and m.line == 104
    assert m.evidence.line_numbers == (100, 102, 104)


def test_a_hit_on_the_line_after_a_closed_traceback_is_that_line_alone(rs: RuleSet) -> None:
    text = (
        'INFO a\nTraceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: boom\n'
        "INFO this line closes the traceback\nnode1: x ncclSystemError\n"
    )
    st = MatcherState(run_id="r1", attempt=1)
    (m,) = scan_text(rs, st, text.encode(), "ray-driver.log", use_hyperscan=False) + flush(rs, st)
    assert (m.rule, m.line) == ("nccl-error", 6)
    assert m.evidence.lines == ("node1: x ncclSystemError",)
