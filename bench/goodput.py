"""Goodput of a 16k-GPU training campaign under each way of supervising it, side by side, in one run.

The failure trace is shaped like the published Llama 3 405B pre-training interruptions ("The Llama 3 Herd of
Models", 2024, section 3.3.4 and Table 5): 466 interruptions in a 54-day snapshot on 16,384 H100s, 47 of them
planned (maintenance, configuration changes) and 419 unexpected, by root cause (counts from Table 5, grouped):

    gpu       196  faulty GPU 148, GPU SRAM 19, GPU system processor 17, thermal 6, silent data corruption 6
    hbm        72  GPU HBM3 memory
    network    49  switch/cable 35, NIC 7, NCCL watchdog timeouts 7
    host       46  host maintenance 32, SSD 3, power supply 3, chassis 2, IO board 2, CPU 2, system memory 2
    software   56  software bugs 54, dependencies 2

plus the jobs' own time limits (--time-limit-h). Gaps between failures are drawn (seeded) from an exponential
distribution and scaled so the 419 unexpected failures fall over exactly --days of training: the mean time
between failures (MTBF) is the paper's, about 3.1 h. Each failure shows itself the way it does on Slurm: a
GPU or HBM fault as a CUDA/Xid line and a crash; a network fault as the NCCL watchdog's line after the
collective timeout (the steps stop at the fault meanwhile, so Shepherd's stall rule may fire first, as it does
in the daemon); a host as NODE_FAIL (and srun's "Node failure on") after SlurmdTimeout; a software bug as
a Ray actor death (a rule knows it) or, for --software-unrecognised of them, a traceback no rule knows. A
fraction --hang-fraction of GPU, HBM and network faults hang silently instead: no line, no exit, the steps
just stop. Planned interruptions are graceful preemptions (the trainer saves first).

The same trace is replayed under three strategies, each with its real cadence:

    human         the seeds' monitor_training.py (not in this repository; modelled from its description):
                  squeue every 300 s, alerts on a job's end; a human reacts after --human-reaction-s and
                  resubmits from the latest checkpoint. A silent hang is seen only when the job hits its time
                  limit.
    poller        a fixed-interval poller that resumes every failed job from the latest checkpoint at once
                  (SkyPilot-like: job status every 15 s, no hang detection, no backoff).
    shepherd      Shepherd's REAL decision code: the shipped default rules compiled by the real
                  engine see each failure's line or Slurm state (or, for a hang, the clock: the
                  `rollouts-stalled` timer), decide/history.py turns the run's attempts and decisions so far
                  into the policy's records, decide/plan.py + decide/policy.py decide (budget, backoff,
                  thrash and same-signature stops), decide/checkpoints.py picks the checkpoint. Detection
                  cadences are the daemon's defaults (settings.py): log files polled every
                  watch.poll_interval_s (shared filesystems), Slurm every slurm.steady_poll_interval_s. When
                  the policy stops resuming, a human must `shepherd resume` (same reaction time as above), and
                  the policy counts afresh from that attempt. A failure no rule knows is resumed once when the
                  attempt made progress first (a new checkpoint, or steps past the one it started from:
                  decide/plan.py unrecognised_resume), else it waits for that human too.
                  Hang detection is the shipped learnt rule, fed the attempt's step banners before the hang;
                  a comparison line shows the old fixed 30-minute rule (--fixed-hang-bound-s).

Issue 31 ("keep the allocation") adds four, each under two queue models:

    resubmit         today's Shepherd: the `shepherd` strategy under its issue-31 name (one simulation).
    in_place         Shepherd's same decisions, but its job-side runner keeps the Slurm job when the driver
                     exits: a resume the policy allows restarts inside the running job when the job still
                     runs and the rule's fix needs no other allocation (the daemon's own rule,
                     supervisor/decide/inplace.py's can_restart_in_place). The runner's exit report is read
                     like a log file (watch.poll_interval_s), the runner sees Shepherd's word within
                     --runner-poll-s, and the restart costs only --load-s (loading, 300 s of the 600 s
                     start-up): no sbatch, no queue, no Ray start. A host failure (NODE_FAIL ends the job), a
                     time limit, a preemption, a fix that needs another allocation (excluding a node, sbatch
                     arguments), a human's resume or a word later than the runner's bound (--runner-wait-s)
                     resubmits as today.
    in_place_spares  as in_place, each job holding K spare nodes: a GPU or HBM fault on a node that stays up
                     (the rule excludes the node) restarts in place without that node while a spare is left
                     and the node is not the head node. K = the GPU/HBM faults expected in one job's length
                     (the time limit) from the trace's rate, plus one; the spares' GPUs are held for the whole
                     campaign, idle, and count as lost GPU-hours (goodput's denominator has N + K nodes).
    in_place_tuned, in_place_spares_tuned
                     the same two with `checkpoint.tune_interval: true`, nothing else changed (the same
                     random draws too): each submission gets the save period Shepherd's real code passes
                     (act/interval.py's next_save_period over decide/interval.py: Young/Daly from the save
                     time and the run's own MTBF once it holds 3 failures, in whole --step-s steps, only a
                     divisor of the kept aligned steps: safe_save_period); a restart in place keeps the
                     period, as the daemon does. Until then the command's period (--checkpoint-interval-s)
                     stands. The trainer
                     saves at multiples of its period, as NeMo RL does (resumed off them, e.g. after a
                     preemption's save, its first save comes sooner); the untuned strategies keep the bench's
                     older model, a save every interval from the attempt's start, which is the same whenever
                     an attempt starts on an aligned step. See Tuner for what is simplified.
    ceiling          what no supervisor beats here: checkpoints every Young/Daly interval sqrt(2 x save x
                     MTBF), each failure (host failures too) seen at once and restarted in place for the load
                     time plus the work redone since the checkpoint, a known end (time limit, planned) saved
                     first; the requeues at time limits and planned interruptions pay the same queue and
                     start-up as everyone else's.

Queue models: `reservation`, a constant --queue-wait-s (120 s: a dedicated reservation, today's number) and
`shared_cluster`, each submission's wait drawn (seeded, the same k-th draw for every strategy) from a
lognormal with a 20-minute median (--shared-queue-median-s) and sigma 1.0 (--shared-queue-sigma). Why 1.0: it
puts the middle 80% of waits between about 6 and 72 minutes and the mean at 33 minutes, which is what issue
31 describes for a requeued 32-node job on a shared cluster ("tens of minutes to hours"; its arithmetic
uses 30 minutes per failure); a smaller sigma would make hour-long waits rare, a larger one would let a few
multi-hour waits decide the comparison. Queue waits and this trace are not correlated (a real queue is
busier by day).

All strategies share the time model for Slurm requeue and start-up (--queue-wait-s, --startup-s, --job-exit-s,
--cancel-s), the checkpoint interval and save time (--checkpoint-interval-s, --checkpoint-save-s) and the
latest-checkpoint choice. Each attempt becomes the report's input (supervisor/report/costs.py), so the lost
time per failure (work redone since the checkpoint, failure -> detection, detection -> resubmission, then the
requeue and bring-up) is computed by the same model as `shepherd report`.

Goodput here is productive GPU-hours / GPU-hours of the campaign's reservation (wall-clock x GPUs): a 16k-GPU
campaign holds its GPUs while it waits for detection, a human and the requeue. `job_goodput` is the report's
own definition (productive / allocated to jobs). Shepherd's own overhead per failure = failure visible ->
decision -> resubmission (backoff and any wait for a human included; the job's own timeouts such as the NCCL
watchdog and SlurmdTimeout, the queue wait and the recompute excluded), as a fraction of the MTBF; goal < 1%.

Prints lost GPU-hours per failure by cause and the goodput of each strategy, ratios against the human
baseline, then every strategy under both queue models with its ratio to the ceiling and issue 31's goals (in
place + spares >= 95% of the ceiling on shared_cluster, >= 97% on reservation; Shepherd's overhead per failure
< 1% of the MTBF), writes bench/results/goodput.json; the LAST line is a JSON object with goodput (the three
first strategies, reservation), shepherd_overhead_fraction_of_mtbf, shepherd_best_goodput, and per queue model
`{"reservation": {"goodput": {...}, "ratio_to_ceiling": {...}, "tuned_interval": {...}, ...},
"shared_cluster": {...}}` with every strategy (tuned_interval: the tuned strategies' save periods and what
each was computed from), `goals` (issue 31's, for in place + spares) and `goals_by_strategy` (the same goals
for each in-place strategy, tuned or not).
Usage: .venv/bin/python bench/goodput.py [--seed 405] [--hang-fraction 0.05] [--fixed-hang-bound-s 1800] ...
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.act.interval import FileSide, StoreSide, failures, next_save_period
from supervisor.decide.checkpoints import choose, discover
from supervisor.decide.history import attempt_records, policy_config
from supervisor.decide.inplace import RUNNER_SETTLE_S, can_restart_in_place
from supervisor.decide.interval import MIN_FAILURES, Exposure, young_daly_interval_s
from supervisor.decide.plan import GiveUp, Resume, plan_match, unrecognised_resume
from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import ProgressEvent, StateEvent, Tick
from supervisor.domain.runs import UNRECOGNISED, AttemptRow, AttemptState, DecisionRow
from supervisor.domain.spec import JobSpec
from supervisor.report.costs import AttemptFacts, Cost, Failure, cost
from supervisor.rules.engine import (
    Match,
    MatcherState,
    RuleSet,
    feed,
    flush,
    load_ruleset,
    note_files,
    scan_lines,
)
from supervisor.rules.rhythm import Rhythm
from supervisor.rules.state import looks_like_ip
from supervisor.settings import Settings
from supervisor.watch.lines import normalise_text

RESULTS = Path(__file__).resolve().parent / "results" / "goodput.json"
RUN = "llama3-405b"
CAUSES = {"gpu": 196, "hbm": 72, "network": 49, "host": 46, "software": 56}
PLANNED = 47
# What each cause writes where Shepherd reads it (real lines; each must be claimed by the rule named).
LINES = {
    "gpu": (
        "(RayWorkerWrapper pid=2517, ip={ip}) NVRM: Xid (PCI:0000:b7:00): 79, pid=2517, name=python, GPU has "
        "fallen off the bus.",
        "cuda-hardware-error",
    ),
    "hbm": (
        "(RayWorkerWrapper pid=2517, ip={ip}) RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "cuda-hardware-error",
    ),
    "network": (
        "[rank1234]:[E1121 03:12:44.123456 4242 ProcessGroupNCCL.cpp:616] [Rank 1234] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) "
        "ran for 600043 milliseconds before timing out.",
        "nccl-error",
    ),
    "host": ("srun: error: Node failure on {node}", "node-failure"),
    "software": (
        "(raylet) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "ray-actor-died",
    ),
    "software-unknown": ("ValueError: tensor shapes do not match in moe_dispatch (8192 vs 8190)", None),
}
STATES = {"host": JobState.NODE_FAIL, "time_limit": JobState.TIMEOUT, "planned": JobState.PREEMPTED}
STRATEGIES = ("human", "poller", "shepherd")  # today's three: the last line's top-level keys
# Keeping the allocation (issue 31), side by side with them under each queue model.
# With `checkpoint.tune_interval: true`: their untuned namesakes, the save period tuned by Shepherd.
TUNED = {"in_place_tuned": "in_place", "in_place_spares_tuned": "in_place_spares"}
ALL_STRATEGIES = (*STRATEGIES, "resubmit", "in_place", "in_place_spares", *TUNED, "ceiling")
# strategies that run the real decision code
DECIDERS = ("shepherd", "in_place", "in_place_spares", *TUNED)
SPARE_CAUSES = ("gpu", "hbm")  # faults on a node whose host stays up: what a spare node absorbs
HEAD_NODE = 1  # node0001: the job's first node, where the driver and Ray's GCS run
RECENT_STEPS = 30  # steps fed to the stalled trigger before a hang: enough to learn (min_samples), cheap
HISTORY = 64  # attempts the policy is shown (see ShepherdDecider.decide)
KEEP_CHECKPOINTS = 3  # the newest checkpoints the trainer keeps on disk (NeMo RL's keep_top_k + latest)
LABEL = {
    "human": "human + monitor_training.py (300 s poll, alert only)",
    "poller": "fixed-interval poller (15 s, resume all, no hang detection)",
    "shepherd": "Shepherd (real rules, policy, checkpoint choice)",
    "resubmit": "resubmit: today's Shepherd (every recovery through Slurm)",
    "in_place": "in place: restart inside the running job",
    "in_place_spares": "in place + spare nodes for GPU/HBM faults",
    "in_place_tuned": "in place, checkpoint.tune_interval: true",
    "in_place_spares_tuned": "in place + spares, checkpoint.tune_interval: true",
    "ceiling": "ceiling: Young/Daly interval, load + redone work only",
}


@dataclass(frozen=True, slots=True)
class Event:
    """One interruption of the trace: after `gap_s` of training since the previous one."""

    cause: str  # gpu | hbm | network | host | software | planned | done
    gap_s: float
    hang: bool = False
    recognised: bool = True
    node: int = 1  # which of the job's nodes it struck (node0001 ...; Ray names it by its address)

    @property
    def node_name(self) -> str:
        return f"node{self.node:04d}"

    @property
    def address(self) -> str:
        return f"10.64.{self.node // 256}.{self.node % 256}"


@dataclass
class Outcome:
    """One strategy's campaign: the attempts as the report sees them, and what each failure was."""

    attempts: list[AttemptFacts] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)  # per attempt: what ended it
    overhead: list[tuple[str, float]] = field(
        default_factory=list
    )  # (cause, visible -> resubmitted) per failure
    stops: list[str] = field(default_factory=list)  # why Shepherd's policy stopped and waited for a human
    human_wait: list[float] = field(default_factory=list)  # per failure: of its overhead, waiting for a human
    decision_cpu_s: list[float] = field(default_factory=list)
    in_place: list[tuple[str, int]] = field(default_factory=list)  # restarts inside the job: (cause, attempt)
    spare_gpus: float = 0.0  # GPUs the jobs hold beyond the trainer's (spare nodes): idle, counted as lost
    queue_waits: list[float] = field(default_factory=list)  # per submission: its queue wait
    tuning: list[dict[str, Any]] | None = None  # tune_interval's save period changes (None: not tuned)


@dataclass(frozen=True, slots=True)
class QueueModel:
    """How long a submitted job waits in Slurm's queue: a constant, or seeded lognormal draws.

    Every strategy draws from the same seeded stream, so the k-th submission of each waits alike (common
    random numbers: the strategies differ by what they do, not by their luck in the queue)."""

    name: str
    median_s: float
    sigma: float = 0.0

    def waits(self, seed: int) -> Iterator[float]:
        rng = random.Random(f"{seed}-queue-{self.name}")
        mu = math.log(self.median_s) if self.median_s > 0 else 0.0
        while True:
            yield rng.lognormvariate(mu, self.sigma) if self.sigma > 0 else self.median_s


@dataclass(frozen=True, slots=True)
class Work:
    """What one attempt's training did in `e_event` seconds: periodic saves every `interval` of work."""

    reached_work: float  # campaign work (seconds) reached when it stopped
    kept_work: float  # campaign work in its last complete checkpoint
    offset: float  # into the interval it stopped in (past `interval`: inside a save)
    ckpts: list[tuple[int, float]]  # (step, written at)
    stretches: list[tuple[str, float, float | None]]  # checkpoint saves


def train(
    start_work: float,
    train_start: float,
    e_event: float,
    interval: float,
    save_s: float,
    step_s: float,
    first: float | None = None,
) -> Work:
    """`first`: the work before the first save, where it is shorter than `interval` (a trainer that saves at
    multiples of its save period, as NeMo RL does, resumed from a step off them); None: a whole interval."""
    lead = 0.0 if first is None else interval - first  # as if the attempt began this far into a cycle
    cycle = interval + save_s
    cycles = int((e_event + lead) // cycle)
    offset = e_event + lead - cycles * cycle
    reached_work = start_work + cycles * interval + min(offset, interval) - lead
    kept_work = start_work + cycles * interval - lead if cycles else start_work
    ckpts = [
        (int((start_work + k * interval - lead) // step_s), train_start + k * cycle - lead)
        for k in range(1, cycles + 1)
    ]
    stretches: list[tuple[str, float, float | None]] = [("checkpointing", t - save_s, t) for _, t in ckpts]
    if offset > interval:  # stopped inside a save: the part it did is still checkpointing
        stretches.append(
            ("checkpointing", train_start + e_event - (offset - interval), train_start + e_event)
        )
    return Work(reached_work, kept_work, offset, ckpts, stretches)


def counts(args: argparse.Namespace) -> tuple[dict[str, int], int, float]:
    """The trace's failures by cause, its planned interruptions and its training seconds, for --scale (a
    part of the campaign at the same MTBF; 1: the whole 54 days)."""
    scaled = {c: round(n * args.scale) for c, n in CAUSES.items()}
    return scaled, round(PLANNED * args.scale), args.days * args.scale * 86400.0


def trace(args: argparse.Namespace) -> list[Event]:
    rng = random.Random(args.seed)
    where = random.Random(f"{args.seed}-nodes")  # its own stream: the trace is the same as without it
    by_cause, planned, total = counts(args)
    causes = [c for c, n in by_cause.items() for _ in range(n)]
    rng.shuffle(causes)
    gaps = [rng.expovariate(1.0) for _ in causes]
    scale = total / sum(gaps)
    events = []
    for cause, gap in zip(causes, gaps, strict=True):
        hang = cause in ("gpu", "hbm", "network") and rng.random() < args.hang_fraction
        recognised = cause != "software" or rng.random() >= args.software_unrecognised
        events.append(Event(cause, gap * scale, hang, recognised, where.randint(1, args.gpus // 8)))
    # Planned interruptions fall at random points of the same campaign.
    marks = sorted(rng.uniform(0, total) for _ in range(planned))
    merged: list[Event] = []
    pos, i = 0.0, 0
    for ev in events:
        end = pos + ev.gap_s
        while i < len(marks) and marks[i] < end:
            merged.append(Event("planned", marks[i] - pos))
            ev = replace(ev, gap_s=end - marks[i])
            pos = marks[i]
            i += 1
        merged.append(ev)
        pos = end
    merged.append(Event("done", args.tail_h * 3600.0))
    return merged


def next_poll(t: float, period: float, phase: float) -> float:
    return phase + math.ceil((t - phase) / period) * period


def spare_nodes(args: argparse.Namespace) -> int:
    """K, from the failure rate alone: the GPU/HBM faults (what a spare absorbs) expected in one job's length
    (its time limit; without one, the campaign), plus one."""
    campaign = float(args.days) * 86400.0
    rate = sum(CAUSES[c] for c in SPARE_CAUSES) / campaign
    length = float(args.time_limit_h) * 3600.0 if args.time_limit_h else campaign
    return math.ceil(rate * length) + 1


class Tuner:
    """`checkpoint.tune_interval: true` as the daemon carries it out: at each submission, act/interval.py's
    `next_save_period` on what Shepherd would have measured by then. A restart in place keeps the period
    (act/actions.py tunes only at a submission), so the switch comes at the first submission after the
    run's 3rd failure, not at the first driver run after it. The save time is --checkpoint-save-s (each
    kept step timed from its files); the seconds per step --step-s (the monitor's step marks); the MTBF the
    run's own, from the report's cost of its attempts so far (running time over failures; time limits and
    preemptions are not failures), once it holds 3 failures: before that, the command's period stands.
    Simplified: the cluster-wide rate is left out, which changes nothing here (the store holds this run
    alone: its rate is the run's, with as few failures). The period starts at --checkpoint-interval-s in
    steps (the command's `checkpointing.save_period`); the kept steps are the bench's checkpoints on disk
    (its KEEP_CHECKPOINTS newest), so `safe_save_period` passes only divisors of their aligned steps."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.command_period = round(args.checkpoint_interval_s / args.step_s)
        self.spec = JobSpec.model_validate(
            {
                "name": RUN,
                "command": ["python", "-m", "train", f"checkpointing.save_period={self.command_period}"],
                "slurm": {"nodes": args.gpus // 8, "gpus_per_node": 8},
                "checkpoint": {"dir": "/ckpt", "tune_interval": True},
            }
        )
        self.passed: int | None = None  # the save period Shepherd passed to the latest attempt
        self.own = Exposure(0, 0.0)  # the run's failures and running seconds over the attempts counted so far
        self.counted = 0  # attempts counted (failures and running time add up attempt by attempt)

    @property
    def period(self) -> int:
        """The save period the trainer runs with: the one passed last, else the command's."""
        return self.passed or self.command_period

    def submit(
        self, n: int, attempts: list[AttemptFacts], kept: list[int], now: float
    ) -> dict[str, Any] | None:
        """Attempt `n`'s period, as loops.py's _tuned_save_period passes it; the change, if it changed."""
        if (
            len(attempts) > self.counted
        ):  # each has ended by now: its running time is its own, whatever follows
            c = cost(attempts[self.counted :], now=now)
            self.own = Exposure(self.own.failures + failures(c), self.own.seconds + c.running_s)
            self.counted = len(attempts)
        own = self.own
        st = StoreSide(
            step_marks=(((0, 0.0), (1, self.args.step_s)),),
            own=own,
            cluster=None,
            nodes=self.args.gpus // 8,
            previous_period=self.passed,
            person_set=False,
        )
        fs = FileSide(tuple(self.args.checkpoint_save_s for _ in kept), tuple(kept), None)
        old = self.period
        self.passed, why = next_save_period(self.spec, st, fs)
        if self.period == old:
            return None
        return {
            "attempt": n,
            "failures": own.failures,
            "running_s": own.seconds,
            "old_period": old,
            "kept_steps": kept,
            "period": self.period,
            "why": why,
        }


def simulate_ceiling(
    events: list[Event], args: argparse.Namespace, queue: QueueModel, mtbf: float
) -> Outcome:
    """What no supervisor can beat on this trace: every failure is seen at once and restarted in place at the
    cost of loading the checkpoint and redoing the work since it, saves every Young/Daly interval, and a
    known end (time limit, planned interruption) is saved first; those requeues still pay the same queue and
    start-up as every other strategy."""
    interval = young_daly_interval_s(args.checkpoint_save_s, mtbf)
    waits = queue.waits(args.seed)
    out = Outcome()
    submit_at, work, i, in_job, limit_end = 0.0, 0.0, 0, False, math.inf
    remaining = events[0].gap_s
    while i < len(events):
        ev = events[i]
        n = len(out.attempts) + 1
        if in_job:
            started = submit_at
            train_start = started + args.load_s
        else:
            out.queue_waits.append(next(waits))
            started = submit_at + args.sbatch_s + out.queue_waits[-1]
            train_start = started + args.startup_s
            limit_end = started + args.time_limit_h * 3600.0 if args.time_limit_h else math.inf
        start_step = int(work // args.step_s)
        e_event, cause = remaining, ev.cause
        if train_start + e_event + args.checkpoint_save_s > limit_end:  # a known end: save before it
            e_event, cause = max(0.0, limit_end - args.checkpoint_save_s - train_start), "time_limit"
        fail = train_start + e_event
        w = train(work, train_start, e_event, interval, args.checkpoint_save_s, args.step_s)
        ckpts, stretches, kept_work = w.ckpts, w.stretches, w.kept_work
        end = fail
        if cause in ("done", "time_limit", "planned"):
            if w.offset > interval:  # inside a periodic save: that save completes, then the job ends
                end = fail + (interval + args.checkpoint_save_s - w.offset)
                ckpts.append((int(w.reached_work // args.step_s), end))
                stretches[-1] = ("checkpointing", stretches[-1][1], end)
            elif cause != "done":
                end = fail + args.checkpoint_save_s
                ckpts.append((int(w.reached_work // args.step_s), end))
                stretches.append(("checkpointing", fail, end))
            kept_work = w.reached_work
        steps = tuple(sorted({*ckpts, (int(w.reached_work // args.step_s), fail)}))
        common = {"training_at": train_start, "stretches": tuple(stretches), "checkpoints": tuple(ckpts)}
        if cause == "done":
            out.attempts.append(
                AttemptFacts(n, float(args.gpus), submit_at, started, end, start_step, steps=steps, **common)
            )
            out.causes.append("done")
            break
        category = {"time_limit": "time_limit", "planned": "preemption"}.get(cause, "failure")
        resume_step = int(kept_work // args.step_s)
        failure = Failure(cause, category, end, end)
        out.attempts.append(
            AttemptFacts(
                n, float(args.gpus), submit_at, started, end, start_step, steps=steps, failure=failure,
                kept_step=resume_step, **common,
            )
        )  # fmt: skip
        out.causes.append("hang" if ev.hang and cause == ev.cause else cause)
        in_job = cause not in ("time_limit", "planned") and end + args.load_s < limit_end
        if cause not in ("time_limit", "planned"):
            out.overhead.append((cause, 0.0))
            out.human_wait.append(0.0)
            if in_job:
                out.in_place.append((out.causes[-1], n))
        work = resume_step * args.step_s
        submit_at = end
        if cause == "time_limit":
            remaining -= e_event
        else:
            i += 1
            remaining = events[i].gap_s if i < len(events) else 0.0
    return out


class ShepherdDecider:
    """The real rules, history, policy and plan over the run so far, as the daemon would call them."""

    def __init__(self, rules: RuleSet, spec: JobSpec, *, step_s: float, startup_s: float) -> None:
        self.rules = rules
        self.spec = spec
        self.cfg = policy_config(spec)
        self.attempts: list[AttemptRow] = []
        self.decisions: list[DecisionRow] = []
        self.step_s, self.startup_s = step_s, startup_s
        # what the stalled trigger learnt of the run's rhythm, handed to each next attempt as the monitor does
        self.learnt: dict[str, Rhythm] = {}
        self.exclude: list[str] = []  # nodes the resumes excluded so far (each attempt's --exclude)

    def attempt_row(
        self,
        n: int,
        submitted: float,
        started: float,
        ended: float | None,
        start_step: int,
        *,
        by_human: bool = False,
    ) -> None:
        overrides = {
            "checkpoint": f"/ckpt/step_{start_step}" if start_step else None,
            "ckpt_step_at_submit": start_step,
            "resumed_by": "human" if by_human else None,  # as `shepherd resume` records it
            "exclude": list(self.exclude),
        }
        row = AttemptRow(
            RUN,
            n,
            f"{RUN}-a{n}",
            AttemptState.SUBMITTED,
            str(10000 + n),
            submitted,
            submitted,
            started,
            ended,
            "RUNNING",
            None,
            None,
            "node[0001-2048]",
            overrides["checkpoint"],
            json.dumps(overrides),
            None,
            None,
        )
        if self.attempts and self.attempts[-1].n == n:
            self.attempts[-1] = row
        else:
            self.attempts.append(row)

    def match(
        self, n: int, started: float, cause: str, ev: Event, *, seen: float, until: float
    ) -> Match | None:
        """What the default rules make of this failure, through the real engine (None: no rule knows it).

        A hang is the clock's business: the attempt's last steps (up to `seen`, the last progress) teach the
        stalled trigger the run's rhythm (NeMo RL's step banners: one whole step per beat), then the monitor
        ticks every second until a stall rule fires or the job's time limit (`until`) comes first."""
        st = MatcherState(run_id=RUN, attempt=n, job_id=str(10000 + n))
        st.rhythms = {k: r.learnt() for k, r in self.learnt.items()}
        feed(self.rules, st, StateEvent(RUN, n, str(10000 + n), JobState.RUNNING, at=started))
        note_files(st, ["STARTED_RAY_HEAD", "ray-head.log", "ray-driver.log"])  # Ray came up
        found: list[Match] = []
        if cause == "hang":
            first = started + self.startup_s  # the first step's banner
            steps = max(0, int((seen - first) // self.step_s))
            for j in range(min(steps, RECENT_STEPS), -1, -1):  # the last ones, the newest at `seen`
                feed(
                    self.rules,
                    st,
                    ProgressEvent(RUN, n, "step", float(steps - j + 1), at=seen - j * self.step_s),
                )
            self.learnt = st.rhythms
            t = seen
            while not found and t < until:
                found = feed(self.rules, st, Tick(t))
                t += 1.0
        elif cause in ("time_limit", "planned"):
            found = feed(self.rules, st, StateEvent(RUN, n, str(10000 + n), STATES[cause], at=seen))
        else:
            key = cause if ev.recognised else "software-unknown"
            line = LINES[key][0].format(ip=ev.address, node=ev.node_name)
            batch = normalise_text(line + "\n")
            found = scan_lines(
                self.rules, st, batch.texts, "ray-driver.log", 1, seen, prefixes=batch.prefixes
            )
            found += flush(self.rules, st, seen)
            if cause == "host":
                found += feed(self.rules, st, StateEvent(RUN, n, str(10000 + n), JobState.NODE_FAIL, at=seen))
        acting = [m for m in found if not m.followup]
        return acting[0] if acting else None

    def unrecognised(self, n: int, now: float) -> None:
        """What Actions.on_unmatched_end records for an end no rule claimed (the run waits for a human)."""
        self.decisions.append(
            DecisionRow(
                len(self.decisions) + 1,
                RUN,
                n,
                now,
                UNRECOGNISED,
                "alert",
                "unrecognised:FAILED",
                "no rule recognised the failure",
                {"state": "FAILED", "exit_code": 1},
                "alerted",
            )
        )

    def decide(
        self, m: Match, n: int, now: float, ckpt_after: int, *, node: str | None = None
    ) -> Resume | GiveUp | None:
        """decide/plan.py on the run's real history (the decision recorded first, as Actions.on_match).

        `node`: the node Slurm names for the evidence's address (Actions._failing_node asks sinfo), used
        when the rule's resume excludes the failing node, as Actions._carry_out does before planning."""
        evidence = {
            "policy": {
                "category": m.category,
                "retryable": m.retryable,
                "deterministic": m.deterministic,
                "max_retries": m.max_retries,
                "ckpt_after": ckpt_after,
            }
        }
        self.decisions.append(
            DecisionRow(
                len(self.decisions) + 1,
                RUN,
                n,
                now,
                m.rule,
                ",".join(m.action_names),
                m.signature,
                m.reason,
                evidence,
                "carried out",
            )
        )
        if m.excludes_node:
            m = replace(m, node=node if m.node and looks_like_ip(m.node) else m.node)
        # The policy looks back to the last progress, a healthy stretch, another signature or an hour ago;
        # the newest HISTORY attempts hold all of that (the daemon passes them all: O(n) per decision).
        past = attempt_records(
            self.attempts[-HISTORY:],
            [d for d in self.decisions[-4 * HISTORY :] if d.attempt is not None and d.attempt > n - HISTORY],
            now=now,
            current=m,
            run_cap=self.cfg.max_retries,
        )
        plan = plan_match(
            m,
            past,
            self.cfg,
            now=now,
            context=m.template_context(
                str(10000 + n), {"name": RUN, "shared_cache_dir": "/shared/cache", "checkpoint_dir": "/ckpt"}
            ),
            default_checkpoint=self.spec.resume.checkpoint,
        )
        for effect in plan.effects:
            if isinstance(effect, Resume) and effect.exclude_node and m.node:
                self.exclude.append(m.node)
            if isinstance(effect, Resume | GiveUp):
                return effect
        return None


def simulate(
    strategy: str,
    events: list[Event],
    args: argparse.Namespace,
    rules: RuleSet,
    queue: QueueModel | None = None,
) -> Outcome:
    s = Settings()
    base = TUNED.get(strategy, strategy)  # a tuned strategy is its namesake with tune_interval on
    rng = random.Random(f"{args.seed}-{base}")  # ... and draws its namesake's jitter (common random numbers)
    poll = (
        s.slurm.steady_poll_interval_s if strategy in DECIDERS else {"human": 300.0, "poller": 15.0}[strategy]
    )
    phase = rng.uniform(0, poll)
    gpus = float(args.gpus)
    keeps_job = base in ("in_place", "in_place_spares")  # the job-side runner keeps the allocation
    spares = spare_nodes(args) if base == "in_place_spares" else 0
    tuner = Tuner(args) if strategy in TUNED else None
    waits = (queue or QueueModel("reservation", args.queue_wait_s)).waits(args.seed)
    spec = JobSpec.model_validate(
        {
            "name": RUN,
            "command": ["python", "-m", "train"],
            "slurm": {"nodes": args.gpus // 8, "gpus_per_node": 8},
            "checkpoint": {"dir": "/ckpt"},
        }
    )
    decider = ShepherdDecider(rules, spec, step_s=args.step_s, startup_s=args.startup_s)
    out = Outcome(spare_gpus=8.0 * spares, tuning=[] if tuner else None)
    saved_steps: list[int] = [0]  # complete checkpoints on disk (campaign steps)
    submit_at, work, i = 0.0, 0.0, 0
    by_human = False  # the next attempt is a person's resubmission after the policy stopped
    in_job = False  # the next attempt is a driver run inside the running job (restarted in place)
    limit_end, spares_left = math.inf, 0
    remaining = events[0].gap_s
    while i < len(events):
        ev = events[i]
        n = len(out.attempts) + 1
        if in_job:  # the runner sees Shepherd's word at its next look, then the driver loads the checkpoint
            started = submit_at + rng.uniform(0, args.runner_poll_s)
            train_start = started + args.load_s
        else:
            out.queue_waits.append(next(waits))
            started = submit_at + args.sbatch_s + out.queue_waits[-1]
            train_start = started + args.startup_s
            limit_end = started + args.time_limit_h * 3600.0 if args.time_limit_h else math.inf
            spares_left = spares
            if tuner is not None and out.tuning is not None:  # the daemon tunes at a submission only
                kept = [st for st in sorted(set(saved_steps))[-KEEP_CHECKPOINTS:] if st > 0]
                change = tuner.submit(n, out.attempts, kept, submit_at)
                if change is not None:
                    out.tuning.append(change)
        start_work = work
        start_step = int(start_work // args.step_s)
        interval = args.checkpoint_interval_s if tuner is None else tuner.period * args.step_s
        # NeMo RL saves at multiples of its save period: resumed off them, the first save comes sooner
        first = None if tuner is None else (tuner.period - start_step % tuner.period) * args.step_s
        e_event = remaining
        cause = ev.cause
        if train_start + e_event > limit_end:
            e_event, cause = max(0.0, limit_end - train_start), "time_limit"
        hang = ev.hang and cause != "time_limit"
        fail = train_start + e_event
        w = train(start_work, train_start, e_event, interval, args.checkpoint_save_s, args.step_s, first)
        reached_work, kept_work, offset, ckpts, stretches = (
            w.reached_work,
            w.kept_work,
            w.offset,
            w.ckpts,
            w.stretches,
        )
        decider.attempt_row(n, submit_at, started, None, start_step, by_human=by_human)
        decider.startup_s = train_start - started  # the first step's banner comes after start-up or loading
        if cause == "done":
            end = fail + args.job_exit_s
            out.attempts.append(
                AttemptFacts(
                    n,
                    gpus,
                    submit_at,
                    started,
                    end,
                    start_step,
                    steps=((int(reached_work // args.step_s), fail),),
                    training_at=train_start,
                    stretches=tuple(stretches),
                    checkpoints=tuple(ckpts),
                )
            )
            out.causes.append("done")
            break
        if cause == "planned":  # graceful: the trainer saves when Slurm signals it, then the job ends
            kept_work = reached_work
            job_end = fail + args.checkpoint_save_s
            stretches.append(("checkpointing", fail, job_end))
            ckpts.append((int(kept_work // args.step_s), job_end))
            visible = fail = job_end
        elif hang:
            job_end, visible = limit_end, fail  # nothing ends and nothing is written: the steps just stop
        elif cause == "time_limit":
            job_end = visible = limit_end
        else:
            delay = {"network": args.nccl_timeout_s, "host": args.slurmd_timeout_s}.get(
                cause, args.log_flush_s
            )
            visible = fail + delay
            # the driver's exit: with the runner it ends the driver run (the job waits for Shepherd's word)
            job_end = visible + (0.0 if cause == "host" else args.job_exit_s)
        # With the runner the job outlives its driver (a host's NODE_FAIL, a time limit, a preemption end it).
        runner_waits = keeps_job and cause not in ("host", "time_limit", "planned")
        saved_steps += [s for s, _ in ckpts]
        # -- who sees it, when, and what they do --------------------------------------------------------
        stop = None
        restart_in_place = False
        if strategy in DECIDERS:
            cpu0 = time.perf_counter()
            # A collective that lost its peer blocks until NCCL's watchdog ends it (`visible`); the steps stop
            # at the fault, so the stall rule (fed the same banners as for a hang) fires first when its bound
            # is shorter. Counted from the fault, as a hang is: the wait for the stall is Shepherd's overhead.
            stalled = None
            if cause == "network" and not hang:
                stalled = decider.match(n, started, "hang", ev, seen=fail, until=visible)
            if stalled is not None:
                m, seen, visible = stalled, fail, fail
            else:
                if hang:
                    seen = fail  # the last progress: the stall timer runs from here
                elif runner_waits and cause == "software" and not ev.recognised:
                    # the runner's exit report, read; no rule claims it while the rules have their time
                    seen = job_end + rng.uniform(0, s.watch.poll_interval_s) + RUNNER_SETTLE_S
                elif cause in ("time_limit", "planned") or (cause == "software" and not ev.recognised):
                    seen = next_poll(job_end, poll, phase)  # a Slurm state: the next poll sees it
                else:
                    # a line: the next look at the file
                    seen = visible + rng.uniform(0, s.watch.poll_interval_s)
                m = decider.match(n, started, "hang" if hang else cause, ev, seen=seen, until=limit_end)
            if m is None and hang:  # the time limit came first: TIMEOUT, seen at the next poll
                seen = next_poll(limit_end, poll, phase)
                runner_waits = False  # the time limit ended the job
                m = decider.match(n, started, "time_limit", ev, seen=seen, until=limit_end)
            detected = m.evidence.at if m is not None and (hang or stalled is not None) else seen
            if m is None:  # no rule: the job ends FAILED, seen at the next poll (Actions.on_unmatched_end)
                detected = seen if runner_waits and not hang else next_poll(job_end, poll, phase)
                m = unrecognised_resume(
                    RUN, n, JobState.FAILED, "no rule recognised the failure",
                    step_before=start_step, step_after=saved_steps[-1], at=detected,
                    trained_to=int(reached_work // args.step_s),
                )  # fmt: skip
                if m is None:  # no progress first: recorded as `unrecognised-failure`; a human resumes
                    decider.unrecognised(n, detected)
            if detected < job_end:  # Shepherd cancels a job it has given up on or will resume
                job_end = min(job_end, detected + args.cancel_s)
            decider.attempt_row(n, submit_at, started, job_end, start_step, by_human=by_human)
            decision = (
                decider.decide(m, n, detected, saved_steps[-1], node=ev.node_name) if m is not None else None
            )
            out.decision_cpu_s.append(time.perf_counter() - cpu0)
            # A resume waits for Slurm to say the job is gone, at the fast cadence (loops.poll_interval).
            fast = isinstance(decision, Resume) and job_end > detected
            gone = next_poll(job_end, s.slurm.poll_interval_s if fast else poll, phase)
            if isinstance(decision, Resume) and runner_waits:
                # The runner reported the driver's exit; Shepherd's word is written once it has both.
                word = max(decision.at, job_end + rng.uniform(0, s.watch.poll_interval_s))
                restart_in_place = can_restart_in_place(
                    decision,
                    job_running=word - job_end <= args.runner_wait_s
                    and word + args.runner_poll_s + args.load_s < limit_end,
                    spare_left=spares_left > 0,
                    head_node=ev.node == HEAD_NODE,
                )
            if restart_in_place:
                assert isinstance(decision, Resume)
                resubmit, selector = word, decision.selector
                spares_left -= 1 if decision.exclude_node else 0
                out.in_place.append(("hang" if hang else cause, n))
            elif isinstance(decision, Resume):
                if runner_waits:  # the job outlived its driver: Shepherd cancels it, then resubmits
                    job_end = detected + args.cancel_s
                    gone = next_poll(job_end, s.slurm.poll_interval_s, phase)
                resubmit = max(decision.at, gone)
                selector = decision.selector
            else:
                if runner_waits:  # Shepherd cancels the job it gave up on (the runner's bound would end it)
                    job_end = detected + args.cancel_s
                    gone = next_poll(job_end, poll, phase)
                stop = decision.reason if isinstance(decision, GiveUp) else "no rule recognised the failure"
                resubmit = max(detected, gone) + args.human_reaction_s + args.human_resubmit_s
                selector = "latest"
        else:
            detected = next_poll(job_end, poll, phase)
            resubmit = detected + (
                args.human_reaction_s + args.human_resubmit_s if strategy == "human" else 0.0
            )
            selector = "latest"
        # The checkpoint: the real choice among complete ones (a save cut short is a tmp_step_N: never).
        kept = sorted(set(saved_steps))[-KEEP_CHECKPOINTS:]
        listing = [(f"step_{st}", {"step": st}, True) for st in kept]
        if offset > interval and cause != "planned":
            listing.append((f"tmp_step_{int(reached_work // args.step_s)}", None, False))
        chosen = choose(discover(listing), selector).checkpoint
        resume_step = chosen.step if chosen is not None else 0
        rule = cause
        if strategy in DECIDERS:
            rule = m.rule if m is not None else UNRECOGNISED
        category = (
            m.category
            if strategy in DECIDERS and m is not None
            else (
                "time_limit" if cause == "time_limit" else "preemption" if cause == "planned" else "failure"
            )
        )
        out.attempts.append(
            AttemptFacts(
                n,
                gpus,
                submit_at,
                started,
                job_end,
                start_step,
                steps=tuple(sorted({(s, t) for s, t in ckpts} | {(int(reached_work // args.step_s), fail)})),
                training_at=train_start,
                stretches=tuple(stretches),
                checkpoints=tuple(ckpts),
                failure=Failure(rule, category, fail, max(detected, fail)),
                kept_step=resume_step,
            )
        )
        out.causes.append("hang" if hang else cause)
        if cause not in ("time_limit", "planned"):
            out.overhead.append((cause, resubmit - visible))
            out.human_wait.append(args.human_reaction_s + args.human_resubmit_s if stop is not None else 0.0)
        if stop is not None:
            out.stops.append(stop)
        work = resume_step * args.step_s
        submit_at = resubmit
        by_human = stop is not None
        in_job = restart_in_place
        if cause == "time_limit":
            remaining -= e_event  # the failure clock ran; the trace's event still lies ahead
        else:
            i += 1
            remaining = events[i].gap_s if i < len(events) else 0.0
    return out


def summarise(out: Outcome, args: argparse.Namespace) -> dict[str, Any]:
    c: Cost = cost(out.attempts, now=out.attempts[-1].ended_at or 0.0)
    held = args.gpus + out.spare_gpus  # spare nodes' GPUs are held too, idle: lost GPU-hours
    reserved = c.wall_s * held / 3600.0
    in_place = {n for _, n in out.in_place}
    by_cause: dict[str, list[float]] = {}
    for f in c.failures:
        cause = out.causes[f.attempt - 1]
        by_cause.setdefault(cause, []).append(f.total_s * args.gpus / 3600.0)
    unexpected = [o for _, o in out.overhead]
    return {
        "goodput": c.gpu_hours["productive"] / reserved,
        "job_goodput": c.goodput * args.gpus / held if c.goodput is not None else None,
        "wall_days": c.wall_s / 86400.0,
        "productive_days": c.seconds["productive"] / 86400.0,
        "attempts": c.attempts,
        "lost_gpu_hours_per_failure": {k: statistics.fmean(v) for k, v in sorted(by_cause.items())},
        "failures_by_cause": {k: len(v) for k, v in sorted(by_cause.items())},
        "overhead_s_per_failure": statistics.fmean(unexpected) if unexpected else 0.0,
        "human_wait_s_per_failure": statistics.fmean(out.human_wait) if out.human_wait else 0.0,
        "overhead_by_cause_s": {
            k: statistics.fmean([o for cz, o in out.overhead if cz == k])
            for k in sorted({cz for cz, _ in out.overhead})
        },
        "seconds": {k: v for k, v in c.seconds.items() if v},
        "stops_for_a_human": len(out.stops),
        "stop_reasons": {
            k: sum(1 for r in out.stops if stop_kind(r) == k)
            for k in sorted({stop_kind(r) for r in out.stops})
        },
        "decision_cpu_ms_p50": 1000 * statistics.median(out.decision_cpu_s) if out.decision_cpu_s else None,
        "restarts_in_place": {
            k: sum(1 for cz, _ in out.in_place if cz == k) for k in sorted({cz for cz, _ in out.in_place})
        },
        "queue_s_max_in_place": max((f.requeue_s for f in c.failures if f.attempt in in_place), default=0.0),
        "submissions": len(out.queue_waits),
        "queue_wait_s_mean": statistics.fmean(out.queue_waits) if out.queue_waits else 0.0,
        "spare_gpus": out.spare_gpus,
        "spare_gpu_hours": c.wall_s * out.spare_gpus / 3600.0,
        **({"save_period_changes": out.tuning} if out.tuning is not None else {}),
    }


IN_PLACE = ("in_place", "in_place_spares", *TUNED, "ceiling")  # strategies that restart in place
GOAL_STRATEGIES = ("in_place", "in_place_spares", *TUNED)  # whose goals the printout says are met or not
GOAL_RATIOS = {  # issue 31's goals for in place + spares: (queue model, least ratio to the ceiling)
    "in_place_spares_vs_ceiling_shared_cluster": ("shared_cluster", 0.95),
    "in_place_spares_vs_ceiling_reservation": ("reservation", 0.97),
}


def tuned_interval(changes: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """A tuned strategy's save periods: the command's, each change (and what it came from), the last."""
    command = round(args.checkpoint_interval_s / args.step_s)
    last = changes[-1]["period"] if changes else command
    return {
        "command_period": command,
        "step_s": args.step_s,
        "save_s": args.checkpoint_save_s,
        "changes": changes,
        "period": last,
        "interval_s": last * args.step_s,
    }


def side_by_side(
    by_queue: dict[str, dict[str, dict[str, Any]]],
    queues: tuple[QueueModel, ...],
    args: argparse.Namespace,
    mtbf: float,
) -> dict[str, Any]:
    """Every strategy under every queue model, the ratios to the ceiling and issue 31's goals: the lines to
    print ("lines") and the last line's keys."""
    k = spare_nodes(args)
    interval = young_daly_interval_s(args.checkpoint_save_s, mtbf)
    shared = next(q for q in queues if q.sigma > 0)
    z90 = statistics.NormalDist().inv_cdf(0.9)
    lq = [shared.median_s * math.exp(-z90 * shared.sigma), shared.median_s * math.exp(z90 * shared.sigma)]
    mean = shared.median_s * math.exp(shared.sigma**2 / 2)
    lines = [
        "",
        "keeping the allocation (issue 31), per queue model: reservation "
        f"{args.queue_wait_s:.0f} s per submission; shared_cluster lognormal, median "
        f"{shared.median_s / 60:.0f} min, sigma {shared.sigma:g} (p10 {lq[0] / 60:.0f} min, p90 "
        f"{lq[-1] / 60:.0f} min, mean {mean / 60:.0f} min; seeded, the same draws for every strategy)",
        f"  in place: a restart costs --load-s {args.load_s:.0f} s after the decision (of "
        f"{args.startup_s:.0f} s start-up); spares: K = {k} nodes ({8 * k} GPUs, idle until used, counted "
        f"lost), from {sum(CAUSES[c] for c in SPARE_CAUSES)} GPU/HBM faults in {args.days:g} days per "
        f"{args.time_limit_h:g} h job, + 1; ceiling: checkpoint every {interval / 60:.1f} min (Young/Daly, "
        f"{args.checkpoint_save_s:.0f} s save, {mtbf / 3600:.2f} h MTBF), each failure "
        f"{args.load_s:.0f} s + redone work",
        "  tuned (checkpoint.tune_interval: true): from the command's "
        f"{round(args.checkpoint_interval_s / args.step_s)} steps of {args.step_s:g} s, each submission gets "
        f"act/interval.py's save period from the run's own MTBF once it holds {MIN_FAILURES} failures, "
        "Young/Daly in whole steps, only a divisor that keeps the kept steps aligned (safe_save_period)",
        f"  {'strategy':<22}"
        + "".join(f"{q.name + ' gp':>18}{'/ceiling':>9}{'ovh/MTBF':>9}" for q in queues)
        + f"{'in place (res)':>16}",
    ]
    out: dict[str, Any] = {}
    for q in queues:
        r = by_queue[q.name]
        ceiling = r["ceiling"]["goodput"]
        out[q.name] = {
            "goodput": {st: round(r[st]["goodput"], 5) for st in ALL_STRATEGIES},
            "ratio_to_ceiling": {st: round(r[st]["goodput"] / ceiling, 5) for st in ALL_STRATEGIES},
            "overhead_fraction_of_mtbf": {
                st: round(r[st]["overhead_s_per_failure"] / mtbf, 5) for st in ("resubmit", *DECIDERS[1:])
            },
            "restarts_in_place": {st: r[st]["restarts_in_place"] for st in IN_PLACE},
            "queue_s_max_in_place": {st: round(r[st]["queue_s_max_in_place"], 1) for st in IN_PLACE},
            "queue_wait_s_mean": round(r["resubmit"]["queue_wait_s_mean"], 1),
            "spare_gpu_hours": round(r["in_place_spares"]["spare_gpu_hours"], 1),
            "tuned_interval": {st: tuned_interval(r[st]["save_period_changes"], args) for st in TUNED},
        }
    for st in ALL_STRATEGIES:
        row = f"  {st:<22}"
        for q in queues:
            o = out[q.name]
            ovh = o["overhead_fraction_of_mtbf"].get(st)
            row += f"{100 * o['goodput'][st]:>17.2f}%{o['ratio_to_ceiling'][st]:>9.3f}"
            row += f"{100 * ovh:>8.2f}%" if ovh is not None else f"{'-':>9}"
        n_in = sum(out["reservation"]["restarts_in_place"].get(st, {}).values())
        lines.append(row + (f"{n_in:>16}" if st in IN_PLACE else f"{'-':>16}"))
    for q in queues:
        for st, t in out[q.name]["tuned_interval"].items():
            lines.append(
                f"  {st} ({q.name}): save period "
                + " -> ".join(
                    [str(t["command_period"])]
                    + [
                        f"{c['period']} (attempt {c['attempt']}, {c['failures']} failures)"
                        for c in t["changes"]
                    ]
                )
                + f" steps; last {t['interval_s'] / 60:.1f} min (Young/Daly at the whole trace's MTBF: "
                f"{interval / 60:.1f} min)"
            )
    ratio_shared = out["shared_cluster"]["ratio_to_ceiling"]["in_place_spares"]
    ratio_res = out["reservation"]["ratio_to_ceiling"]["in_place_spares"]
    ovh = max(  # the goal's strategies: the tuned ones are reported beside it (goals_by_strategy)
        out[q.name]["overhead_fraction_of_mtbf"][st]
        for q in queues
        for st in ("resubmit", "in_place", "in_place_spares")
    )
    goals = {
        "in_place_spares_vs_ceiling_shared_cluster": {
            "ratio": ratio_shared,
            "goal": 0.95,
            "met": ratio_shared >= 0.95,
        },
        "in_place_spares_vs_ceiling_reservation": {
            "ratio": ratio_res,
            "goal": 0.97,
            "met": ratio_res >= 0.97,
        },
        "shepherd_overhead_fraction_of_mtbf_max": {"fraction": ovh, "goal": 0.01, "met": ovh < 0.01},
    }
    # The same goals, strategy by strategy: which keeping-the-allocation strategy meets which.
    by_strategy: dict[str, dict[str, dict[str, Any]]] = {}
    for name, (model, goal) in GOAL_RATIOS.items():
        by_strategy[name] = {
            st: {"ratio": r, "met": r >= goal}
            for st in GOAL_STRATEGIES
            for r in [out[model]["ratio_to_ceiling"][st]]
        }
    by_strategy["shepherd_overhead_fraction_of_mtbf_max"] = {
        st: {"fraction": f, "met": f < 0.01}
        for st in GOAL_STRATEGIES
        for f in [max(out[q.name]["overhead_fraction_of_mtbf"][st] for q in queues)]
    }
    lines.append(
        f"goals: in place + spares / ceiling on shared_cluster {ratio_shared:.3f} (>= 0.95: "
        f"{'met' if ratio_shared >= 0.95 else 'NOT met'}), on reservation {ratio_res:.3f} (>= 0.97: "
        f"{'met' if ratio_res >= 0.97 else 'NOT met'}); Shepherd's overhead per failure, worst of resubmit, "
        f"in place and in place + spares under both queue models: {100 * ovh:.2f}% of the MTBF (< 1%: "
        f"{'met' if ovh < 0.01 else 'NOT met'})"
    )
    for name, label in (
        ("in_place_spares_vs_ceiling_shared_cluster", "ratio to the ceiling on shared_cluster >= 0.95"),
        ("in_place_spares_vs_ceiling_reservation", "ratio to the ceiling on reservation >= 0.97"),
        (
            "shepherd_overhead_fraction_of_mtbf_max",
            "overhead per failure < 1% of the MTBF (worse queue model)",
        ),
    ):
        lines.append(
            f"  which strategy meets the goal {label}: "
            + ", ".join(
                f"{st} "
                + (f"{v['ratio']:.3f}" if "ratio" in v else f"{100 * v['fraction']:.2f}%")
                + (" met" if v["met"] else " NOT met")
                for st, v in by_strategy[name].items()
            )
        )
    return {
        "lines": lines,
        **out,
        "goals": goals,
        "goals_by_strategy": by_strategy,
        "spare_nodes": k,
        "young_daly_interval_s": round(interval, 1),
        "load_s": args.load_s,
        "queue_models": {
            q.name: {"median_s": q.median_s, "sigma": q.sigma, "kind": "lognormal" if q.sigma else "constant"}
            for q in queues
        },
    }


def stop_kind(reason: str) -> str:
    """The policy's reason for stopping, without the run's particulars."""
    if reason.startswith("the same failure (unrecognised:"):
        return "an unrecognised failure twice in a row"
    for prefix, kind in (
        ("no rule", "no rule recognised the failure, and no new checkpoint came first"),
        ("retry budget", "retry budget spent (failures without a new checkpoint)"),
        ("the same failure", "the same rule's failure 4 times in a row"),
        ("thrashing", "thrashing"),
    ):
        if reason.startswith(prefix):
            return kind
    return reason


def stall_rules(bound_s: float) -> RuleSet:
    """The default rules with `rollouts-stalled` firing after `bound_s` (what a learnt bound would do)."""
    import tempfile

    text = f"""rules:
  - name: rollouts-stalled
    description: no training progress (steps, rollout bar, status.json) while the job runs
    priority: 30
    category: stall
    retryable: true
    max_retries: 2
    trigger: {{kind: stalled, for: {int(bound_s)}s, keys: [step, rollouts, status]}}
    actions:
      - resume: {{from: latest}}
      - alert: {{level: warning, message: "{{run}}: {{reason}}"}}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        fh.write(text)
    return load_ruleset([Path(fh.name)])


def check_lines(rules: RuleSet) -> None:
    """Every representative line must be claimed by the rule it stands for, through the real engine."""
    for key, (line, rule) in LINES.items():
        st = MatcherState(run_id=RUN, attempt=1)
        batch = normalise_text(line + "\n")
        got = [
            m.rule
            for m in scan_lines(rules, st, batch.texts, "ray-driver.log", 1, 1.0, prefixes=batch.prefixes)
            + flush(rules, st, 1.0)
            if not m.followup
        ]
        if (got[0] if got else None) != rule:
            raise SystemExit(f"bench/goodput.py: the {key} line is claimed by {got}, not {rule}")


def arg_parser() -> argparse.ArgumentParser:
    """The bench's options and their defaults (tests parse `[]` for a default run's arguments)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=405)
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--days", type=float, default=54.0, help="training time over which the 419 failures fall")
    ap.add_argument("--tail-h", type=float, default=1.0, help="training after the last failure, then done")
    ap.add_argument("--checkpoint-interval-s", type=float, default=1800.0)
    ap.add_argument("--checkpoint-save-s", type=float, default=60.0)
    ap.add_argument("--step-s", type=float, default=20.0, help="one training step")
    ap.add_argument("--time-limit-h", type=float, default=24.0, help="Slurm time limit per job (0: none)")
    ap.add_argument(
        "--hang-fraction", type=float, default=0.05, help="of GPU, HBM and network faults (assumed)"
    )
    ap.add_argument("--software-unrecognised", type=float, default=0.5, help="software bugs no rule knows")
    ap.add_argument("--sbatch-s", type=float, default=1.0)
    ap.add_argument(
        "--queue-wait-s", type=float, default=120.0, help="requeue into the campaign's reservation"
    )
    ap.add_argument("--startup-s", type=float, default=600.0, help="job start -> first step (Ray, weights)")
    ap.add_argument("--job-exit-s", type=float, default=30.0, help="a crashed driver -> the job's end")
    ap.add_argument("--cancel-s", type=float, default=30.0, help="scancel -> the job's end (KillWait)")
    ap.add_argument(
        "--nccl-timeout-s", type=float, default=600.0, help="collective timeout before the watchdog"
    )
    ap.add_argument("--slurmd-timeout-s", type=float, default=300.0, help="a dead node -> NODE_FAIL")
    ap.add_argument("--log-flush-s", type=float, default=1.0, help="a crash -> its line in the log")
    ap.add_argument(
        "--human-reaction-s", type=float, default=1800.0, help="alert -> a human acts (nights too)"
    )
    ap.add_argument("--human-resubmit-s", type=float, default=120.0, help="a human's resubmission")
    ap.add_argument(
        "--load-s",
        type=float,
        default=300.0,
        help="a restart in place after its decision: loading the checkpoint alone (of --startup-s)",
    )
    ap.add_argument(
        "--runner-poll-s", type=float, default=5.0, help="the job-side runner looks for Shepherd's word"
    )
    ap.add_argument(
        "--runner-wait-s",
        type=float,
        default=600.0,
        help="the runner's bound on waiting for Shepherd's word before it ends the job",
    )
    ap.add_argument(
        "--shared-queue-median-s", type=float, default=1200.0, help="shared_cluster: the queue wait's median"
    )
    ap.add_argument(
        "--shared-queue-sigma", type=float, default=1.0, help="shared_cluster: the lognormal's sigma"
    )
    ap.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="simulate this part of the campaign (failure counts and days alike, the same MTBF): the unit "
        "test runs a smaller one",
    )
    ap.add_argument(
        "--fixed-hang-bound-s",
        type=float,
        default=1800.0,
        help="the comparison line: Shepherd with a fixed stall bound instead of the shipped learnt one "
        "(1800 = the 30-min rule before the learnt bound)",
    )
    ap.add_argument("--no-save", action="store_true", help=f"do not write {RESULTS}")
    return ap


def main() -> int:
    args = arg_parser().parse_args()

    t0 = time.perf_counter()
    default_rules = load_ruleset()
    check_lines(default_rules)
    rules = default_rules  # the shipped rollouts-stalled: learnt from the run's steps (rules/rhythm.py)
    events = trace(args)
    by_cause, planned, total = counts(args)
    mtbf = total / sum(by_cause.values())
    queues = (
        QueueModel("reservation", args.queue_wait_s),
        QueueModel("shared_cluster", args.shared_queue_median_s, args.shared_queue_sigma),
    )
    by_queue: dict[str, dict[str, dict[str, Any]]] = {}
    for q in queues:
        got = {
            st: summarise(simulate(st, events, args, rules, q), args) for st in (*STRATEGIES, *DECIDERS[1:])
        }
        got["resubmit"] = got["shepherd"]  # today's Shepherd: every recovery goes back through Slurm
        got["ceiling"] = summarise(simulate_ceiling(events, args, q, mtbf), args)
        by_queue[q.name] = {st: got[st] for st in ALL_STRATEGIES}
    res = by_queue["reservation"]
    fixed = summarise(simulate("shepherd", events, args, stall_rules(args.fixed_hang_bound_s)), args)
    elapsed = time.perf_counter() - t0

    hang_model = (
        "the shipped rollouts-stalled rule: max(3 x p99 of the run's own steps, 4.5 min), learnt from the "
        f"attempt's steps ({args.step_s:g} s each) and those before"
    )
    hangs = sum(1 for e in events if e.hang)
    print(
        f"trace: {sum(by_cause.values())} unexpected failures ({hangs} silent hangs) + {planned} planned "
        f"over {total / 86400:g} days on {args.gpus} GPUs; MTBF {mtbf / 3600:.2f} h; checkpoint every "
        f"{args.checkpoint_interval_s / 60:.0f} min ({args.checkpoint_save_s:.0f} s save)"
    )
    print(f"Shepherd's hang detection: {hang_model}")
    causes = sorted({c for r in res.values() for c in r["lost_gpu_hours_per_failure"]})
    print("\nlost GPU-hours per failure by cause (redone + detection + resubmission + requeue + bring-up):")
    print(f"  {'cause':<11}{'n':>5}" + "".join(f"{st:>12}" for st in STRATEGIES))
    for c in causes:
        n = res["shepherd"]["failures_by_cause"].get(c, 0)
        row = "".join(
            f"{res[st]['lost_gpu_hours_per_failure'].get(c, float('nan')):>12,.0f}" for st in STRATEGIES
        )
        print(f"  {c:<11}{n:>5}{row}")
    print(
        "\n"
        + f"  {'strategy':<62}{'goodput':>8}{'vs human':>9}{'job gp':>8}{'wall d':>8}{'overhead/failure':>17}"
    )
    base = res["human"]["goodput"]
    for st in STRATEGIES:
        r = res[st]
        print(
            f"  {LABEL[st]:<62}{100 * r['goodput']:>7.2f}%{r['goodput'] / base:>8.3f}x"
            f"{100 * (r['job_goodput'] or 0):>7.2f}%{r['wall_days']:>8.2f}"
            f"{r['overhead_s_per_failure']:>15.0f} s"
        )
    sh = res["shepherd"]
    frac = sh["overhead_s_per_failure"] / mtbf
    fixed_frac = fixed["overhead_s_per_failure"] / mtbf
    best = sh["goodput"] >= max(res[st]["goodput"] for st in STRATEGIES)
    print(
        f"\nShepherd's own overhead per failure (visible -> decided -> resubmitted): "
        f"{sh['overhead_s_per_failure']:.0f} s = {100 * frac:.2f}% of the MTBF (goal < 1%: "
        f"{'met' if frac < 0.01 else 'NOT met'}); by cause: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in sh["overhead_by_cause_s"].items())
    )
    print(
        f"  the policy stopped for a human {sh['stops_for_a_human']} time(s): "
        + (", ".join(f"{k} x{v}" for k, v in sh["stop_reasons"].items()) or "-")
        + f"; waiting for that human is {sh['human_wait_s_per_failure']:.0f} s of the overhead per failure"
        f" (without it: {100 * (sh['overhead_s_per_failure'] - sh['human_wait_s_per_failure']) / mtbf:.2f}%"
        " of the MTBF)"
    )
    print(
        f"  decision code (engine + history + policy + plan), CPU per failure: "
        f"p50 {sh['decision_cpu_ms_p50']:.2f} ms"
    )
    print(
        f"  with a fixed {args.fixed_hang_bound_s / 60:.0f}-min stall bound instead of the learnt one: "
        f"overhead {fixed['overhead_s_per_failure']:.0f} s = {100 * fixed_frac:.2f}% of the MTBF, goodput "
        f"{100 * fixed['goodput']:.2f}%"
    )
    print(
        f"Shepherd has the best goodput of the three: {'yes' if best else 'NO'}; simulated in {elapsed:.1f} s"
    )
    side = side_by_side(by_queue, queues, args, mtbf)
    for line in side.pop("lines"):
        print(line)

    last = {
        "goodput": {st: round(res[st]["goodput"], 5) for st in STRATEGIES},
        "job_goodput": {st: round(res[st]["job_goodput"] or 0.0, 5) for st in STRATEGIES},
        "shepherd_overhead_fraction_of_mtbf": round(frac, 5),
        "shepherd_overhead_s_per_failure": round(sh["overhead_s_per_failure"], 1),
        "shepherd_human_wait_s_per_failure": round(sh["human_wait_s_per_failure"], 1),
        "shepherd_stops_for_a_human": sh["stops_for_a_human"],
        "shepherd_best_goodput": best,
        "mtbf_s": round(mtbf, 1),
        "hang_detection": "learnt",
        "with_fixed_hang_bound": {
            "bound_s": args.fixed_hang_bound_s,
            "overhead_fraction_of_mtbf": round(fixed_frac, 5),
            "goodput": round(fixed["goodput"], 5),
        },
        "elapsed_s": round(elapsed, 1),
        **side,
    }
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps(
                {
                    "params": vars(args),
                    "strategies": {st: res[st] for st in STRATEGIES},
                    "with_fixed_hang_bound": fixed,
                    "by_queue_model": by_queue,
                    "summary": last,
                },
                indent=2,
                default=str,
            )
            + "\n"
        )
    print(json.dumps(last))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
