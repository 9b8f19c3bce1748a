"""A run's own rhythm, learnt from its progress, so a hang is declared in minutes where a fixed timer waits
half an hour, while a phase that is long by nature (a validation, a checkpoint save, the start-up) is judged
by its own history, never by the short steps around it.

Pure: progress in, verdicts out. The matcher keeps one `Rhythm` per learning `stalled` trigger; the daemon
persists it per run (`to_dict`), so a restart or a resumed attempt keeps what was learnt.

The model, per phase (start-up, generation, training, validation, checkpointing, or a whole step where the
trainer shows nothing finer):

* a *beat* is an observation that moved: a key's value, or the phase or phase progress a status snapshot
  reports. A status.json heartbeat (same step, same phase, same phase progress) is no beat.
* each *occurrence* of a phase (generation of step 12, the validation after step 20) ends with the beat that
  starts the next one (another phase, or the same phase of another step). Its sample is the longest silence
  it held: for a phase that shows nothing inside it, its whole duration; for a generation phase whose bar
  ticks every second, its longest pause (the prefill before the first tick, say).
* start-up runs from the job's start until the attempt's first completed step (model load, Ray, vLLM
  warm-up, compilation, the first step, a validation at start); its sample is its whole duration, one per
  attempt.
* the bound for the phase the run is in: ``max(k x p99 of its samples, floor)`` once it has ``min_samples``
  of them, else the fixed threshold (the trigger's ``for``). A stall is no beat for that long.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

STARTUP = "startup"
STEP = "step"  # a whole step: the trainer shows nothing finer (NeMo RL's banners alone)
ENDING = "ending"  # the trainer said it finished, stopped or failed: the job should end by itself
# What trainers call their phases (our status.json, NeMo RL's lines, a bar's description) -> ours.
_PHASE_NAMES = {
    "starting": STARTUP,
    "startup": STARTUP,
    "setup": STARTUP,
    "generating": "generation",
    "generation": "generation",
    "rollout": "generation",
    "rollouts": "generation",
    "training": "training",
    "train": "training",
    "validating": "validation",
    "validation": "validation",
    "evaluating": "validation",
    "eval": "validation",
    "checkpointing": "checkpointing",
    "checkpoint": "checkpointing",
    "saving": "checkpointing",
    "finished": ENDING,
    "stopped": ENDING,
    "failed": ENDING,
    "step": STEP,
}
# Progress keys that name their phase by themselves (watch/progress.py, watch/driver_log.py).
_KEY_PHASES = {"rollouts": "generation", "checkpoint": "checkpointing", "validation": "validation"}
STEP_KEYS = ("step", "status")  # keys whose value is the step counter
NEVER_LEARNT = frozenset({ENDING})
MAX_SAMPLES = (
    200  # recent samples kept per phase: a run whose steps slow down (longer answers) moves with them
)
MAX_PHASES = 16  # a trainer inventing phase names cannot grow the state without bound
_SLUG_RE = re.compile(r"[^a-z0-9]+")


def phase_name(raw: str) -> str:
    """A trainer's word for its phase, as ours; an unknown word is kept (as a slug) and learnt on its own."""
    low = raw.strip().lower()
    if low in _PHASE_NAMES:
        return _PHASE_NAMES[low]
    slug = _SLUG_RE.sub("_", low).strip("_")[:40]
    return _PHASE_NAMES.get(slug, slug or STEP)


def event_phase(key: str, detail: dict[str, object]) -> str | None:
    """The phase a progress observation says the run is in; None when it says nothing about it."""
    raw = detail.get("phase")
    if key in STEP_KEYS and isinstance(raw, str) and raw:
        return phase_name(raw)
    if key == "step":
        return STEP  # a step banner without a finer phase
    return _KEY_PHASES.get(key)


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (p99 of fewer than 100 samples is their maximum: no interpolation past data)."""
    xs = sorted(values)
    return xs[max(0, min(len(xs) - 1, math.ceil(q * len(xs)) - 1))]


def duration(seconds: float) -> str:
    """`45 s`, `5.0 min`, `1.5 h`: short enough for an alert."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True, slots=True)
class Learning:
    """How a `stalled` trigger turns a phase's samples into a bound (rules/model.py validates the values)."""

    k: float = 3.0
    floor_s: float = 300.0
    min_samples: int = 5
    quantile: float = 0.99


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where the run is, how long it has been silent there and the bound it is held to."""

    phase: str
    step: float | None
    since: float  # the last beat
    silent_s: float
    bound_s: float
    expected_s: float | None  # the phase's p99 silence, when learnt
    samples: int
    learnt: bool
    why_fixed: str = ""  # when not learnt: why the fixed threshold applies
    k: float = 3.0
    floor_s: float = 0.0

    @property
    def stalled(self) -> bool:
        return self.silent_s >= self.bound_s

    def describe(self) -> str:
        """The stall reason: the phase, how long it is overdue, and what was expected of it."""
        where = self.phase + (f" at step {self.step:g}" if self.step is not None else "")
        head = f"no progress for {duration(self.silent_s)} in {where}"
        if self.learnt and self.expected_s is not None:
            return (
                f"{head}: {self.phase} shows progress within {duration(self.expected_s)} (p99 of "
                f"{self.samples}), so it is {duration(max(0.0, self.silent_s - self.expected_s))} overdue "
                f"(learnt bound {duration(self.bound_s)} = max({self.k:g} x {duration(self.expected_s)}, "
                f"floor {duration(self.floor_s)}))"
            )
        return f"{head}, {duration(max(0.0, self.silent_s - self.bound_s))} past the fixed bound of " + (
            f"{duration(self.bound_s)} ({self.why_fixed})"
        )


Position = tuple[float, str, float | None]


@dataclass(slots=True)
class Rhythm:
    """What one run's progress taught, plus where the current attempt is in it."""

    samples: dict[str, list[float]] = field(default_factory=dict)  # phase -> recent samples (learnt, durable)
    attempt: int = 0  # the attempt the fields below describe
    started: float | None = None  # this attempt's start (RUNNING, else its first beat)
    phase: str = STARTUP
    last_beat: float | None = None
    longest: float = 0.0  # the longest silence of the current occurrence so far
    base_step: float | None = None  # the step counter at this attempt's first beat
    step: float | None = None  # the step counter now
    warm: bool = False  # start-up is over: the attempt completed a step
    positions: dict[str, Position] = field(default_factory=dict)  # key -> where it last was
    fine: bool = False  # the trainer reports its phases (status.json): banners open no phase of their own

    def learnt(self) -> Rhythm:
        """What carries over to the run's next attempt (or a restarted daemon): the samples, a copy, not
        where this attempt is."""
        return Rhythm(samples={p: list(xs) for p, xs in self.samples.items()})

    def begin(self, attempt: int, at: float) -> None:
        """A new attempt starts (its job RUNNING at `at`): start-up again; what was learnt stays."""
        self.attempt = attempt
        self.started = at
        self.phase = STARTUP
        self.last_beat = at
        self.longest = 0.0
        self.base_step = None
        self.step = None
        self.warm = False
        self.positions = {}
        self.fine = False

    def observe(self, attempt: int, key: str, value: float, detail: dict[str, object], at: float) -> bool:
        """One progress observation; True when it was a beat (something moved)."""
        if attempt != self.attempt or self.last_beat is None or self.started is None:
            self.begin(attempt, at)
        raw_done = detail.get("phase_done")
        done = (
            float(raw_done) if isinstance(raw_done, int | float) and not isinstance(raw_done, bool) else None
        )
        raw_phase = detail.get("phase")
        if isinstance(raw_phase, str) and raw_phase:
            self.fine = True
        pos: Position = (value, raw_phase if isinstance(raw_phase, str) else "", done)
        if self.positions.get(key) == pos:
            return False
        first = key not in self.positions
        self.positions[key] = pos
        assert self.last_beat is not None and self.started is not None
        at = max(at, self.last_beat)  # the trainer's clock may lag ours by a little: time never runs back
        self.longest = max(self.longest, at - self.last_beat)
        self.last_beat = at
        step_before = self.step
        if key in STEP_KEYS:
            if self.base_step is None:
                self.base_step = value
            self.step = value
        if not self.warm:
            if self.base_step is not None and self.step is not None and self.step > self.base_step:
                self._learn(STARTUP, at - self.started)
                self.warm = True
                self._next(self._phase(key, detail) or STEP)
            return True
        phase = self._phase(key, detail)
        # Where a step is all the trainer shows (banners), each step is an occurrence of its own; finer phases
        # end where the phase changes (a step counter moving inside "training" splits nothing).
        new_step = (
            self.phase == STEP
            and key in STEP_KEYS
            and step_before is not None
            and value != step_before
            and not first
        )
        if phase is not None and (phase != self.phase or new_step):
            self._learn(self.phase, self.longest)
            self._next(phase)
        return True

    def _phase(self, key: str, detail: dict[str, object]) -> str | None:
        """The phase an observation opens. A step banner alone says only "a step": where the trainer shows
        its phases (status.json), a banner is a beat inside them, or the silence after the last banner
        (a validation that says nothing) would be learnt as a step's."""
        phase = event_phase(key, detail)
        return None if phase == STEP and self.fine else phase

    def _next(self, phase: str) -> None:
        self.phase = phase
        self.longest = 0.0

    def _learn(self, phase: str, sample: float) -> None:
        if phase in NEVER_LEARNT:
            return
        if phase not in self.samples and len(self.samples) >= MAX_PHASES:
            return
        xs = self.samples.setdefault(phase, [])
        xs.append(round(sample, 3))
        del xs[:-MAX_SAMPLES]

    def verdict(self, now: float, fixed_s: float, learning: Learning) -> Verdict:
        """How the silence since the last beat compares with the current phase's bound."""
        since = self.last_beat if self.last_beat is not None else now
        silent = max(0.0, now - since)
        xs = self.samples.get(self.phase, [])
        if self.phase in NEVER_LEARNT:
            why = "the trainer said it is ending; the job should exit by itself"
        elif len(xs) < learning.min_samples:
            seen = "attempt" if self.phase == STARTUP else "phase"
            why = (
                f"{len(xs)} of the {learning.min_samples} {self.phase} {seen}s needed to learn it seen so far"
            )
        else:
            expected = quantile(xs, learning.quantile)
            return Verdict(
                self.phase,
                self.step,
                since,
                silent,
                max(learning.k * expected, learning.floor_s),
                expected,
                len(xs),
                learnt=True,
                k=learning.k,
                floor_s=learning.floor_s,
            )
        return Verdict(
            self.phase, self.step, since, silent, fixed_s, None, len(xs), learnt=False, why_fixed=why
        )

    # ---- persistence ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "samples": {k: list(v) for k, v in self.samples.items()},
            "attempt": self.attempt,
            "started": self.started,
            "phase": self.phase,
            "last_beat": self.last_beat,
            "longest": self.longest,
            "base_step": self.base_step,
            "step": self.step,
            "warm": self.warm,
            "positions": {k: list(v) for k, v in self.positions.items()},
            "fine": self.fine,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rhythm:
        """Lenient: what does not parse is dropped (a rhythm only ever makes the bound better informed)."""
        samples: dict[str, list[float]] = {}
        raw = d.get("samples")
        for phase, xs in raw.items() if isinstance(raw, dict) else []:
            if isinstance(phase, str) and isinstance(xs, list) and len(samples) < MAX_PHASES:
                samples[phase] = [float(x) for x in xs[-MAX_SAMPLES:] if _finite(x)]
        positions: dict[str, Position] = {}
        rawp = d.get("positions")
        for key, p in rawp.items() if isinstance(rawp, dict) else []:
            if isinstance(p, list) and len(p) == 3 and _finite(p[0]):
                positions[str(key)] = (float(p[0]), str(p[1]), float(p[2]) if _finite(p[2]) else None)
        return cls(
            samples=samples,
            attempt=int(d["attempt"]) if _finite(d.get("attempt")) else 0,
            started=_opt(d.get("started")),
            phase=str(d.get("phase") or STARTUP),
            last_beat=_opt(d.get("last_beat")),
            longest=_opt(d.get("longest")) or 0.0,
            base_step=_opt(d.get("base_step")),
            step=_opt(d.get("step")),
            warm=bool(d.get("warm")),
            positions=positions,
            fine=bool(d.get("fine")),
        )


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _opt(x: object) -> float | None:
    return float(x) if _finite(x) else None  # type: ignore[arg-type]
