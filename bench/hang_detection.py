"""How fast a hung run is declared, and how often a healthy one is, with the learnt rhythm vs the fixed timer.

Progress streams are replayed through Shepherd's REAL engine (the default rules compiled by the real loader,
fed `ProgressEvent`s the way the monitor does, with its one-second clock `Tick`s thinned to --tick-s), twice
in the same run: with the shipped `rollouts-stalled` rule (learnt per-phase bound) and, as the baseline, the
same rule with its `learn:` line removed (today's fixed 30 min).

The streams are generated (seeded), shaped on what the monitor sees from our trainer's status.json (phases
with in-phase progress, a heartbeat rewrite every 10 s that is no progress) and from NeMo RL's driver log
(step banners, `Starting validation at step N`, `Saving checkpoint for step N`); they are not captures of
real GPU runs. `--save-streams DIR` writes each one as JSON lines (t, key, value, detail) to look at.

    hung-banners    NeMo RL banners, 60 s steps (+-10 %), 10 min start-up; step 50 never ends
    hung-status     our trainer's status.json, 60 s steps (40 s generation with a rollout count moving,
                    20 s training); generation of step 50 stops half-way
    healthy-*       --healthy-seeds runs of --healthy-steps steps per shape, irregular on purpose:
      banners       15-25 min start-up, the first two steps 3-5x longer (compilation, vLLM warm-up), 60 s
                    steps (lognormal jitter), validation every 10 steps at ~5x a step, checkpoint saves
                    every 20 steps of 2-8 min (one in ten twice that)
      status        status.json phases: generation 30-60 s whose rollout count moves every 2-10 s, training
                    15-30 s with a data-loader pause of 1-4 min in one step of 25, validating every 10 steps
                    (4-6 min, counting batches every 20-60 s), checkpointing every 20 steps (2-6 min, silent)
      growing       banners whose steps grow from 30 s to 150 s over the run (longer answers as RL goes on)

Prints one line per stream, then the LAST line: a JSON object with `detection_delay_s` (the slower of the two
60 s-step hangs, learnt), `baseline_detection_delay_s` (same, fixed 30 min), `speedup` (baseline / learnt),
`false_alarms` (stall matches over all healthy streams, learnt), `baseline_false_alarms`, and `goal_met`
(detection within 300 s and no false alarm). Writes bench/results/hang_detection.json.
Usage: .venv/bin/python bench/hang_detection.py [--healthy-seeds 8] [--healthy-steps 300] [--tick-s 1]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import ProgressEvent, StateEvent, Tick
from supervisor.rules.engine import MatcherState, RuleSet, feed, load_ruleset, note_files
from supervisor.rules.loader import DEFAULT_RULES_PATH

RESULTS = Path(__file__).resolve().parent / "results" / "hang_detection.json"
RULE = "rollouts-stalled"
RUN = "bench"
GOAL_S = 300.0


@dataclass
class Stream:
    """One recorded run: progress events (time order), when it hung (None: healthy) and when it ends."""

    name: str
    events: list[tuple[float, str, float, dict[str, object]]] = field(default_factory=list)
    hung_at: float | None = None
    end: float = 0.0

    def add(self, t: float, key: str, value: float, detail: dict[str, object] | None = None) -> None:
        self.events.append((t, key, value, dict(detail or {})))


def _jitter(rng: random.Random, mean: float, spread: float = 0.1) -> float:
    return mean * math.exp(rng.gauss(0.0, spread))


# ---- the streams ---------------------------------------------------------------------------------------
def banners(
    name: str, rng: random.Random, steps: int, step_s: float | None, hang_step: int | None, irregular: bool
) -> Stream:
    """NeMo RL's driver log: a banner as each step starts, validation and checkpoint lines between steps."""
    s = Stream(name)
    t = rng.uniform(900, 1500) if irregular else 600.0
    for step in range(1, steps + 1):
        s.add(t, "step", float(step))
        if hang_step == step:
            s.hung_at, s.end = t, t + 3600
            return s
        mean = step_s if step_s is not None else 30.0 + 120.0 * (step - 1) / max(1, steps - 1)
        d = _jitter(rng, mean, 0.15 if irregular else 0.05)
        if irregular and step <= 2:
            d *= rng.uniform(3, 5)  # compilation, CUDA graphs, vLLM warm-up
        t += d
        if irregular and step % 10 == 0:
            s.add(t, "validation", float(step))
            t += _jitter(rng, 5 * mean, 0.1)
        if irregular and step % 20 == 0:
            s.add(t, "checkpoint", float(step))
            t += rng.uniform(120, 480) * (2 if rng.random() < 0.1 else 1)
    s.end = t
    return s


def status_json(name: str, rng: random.Random, steps: int, hang_step: int | None, irregular: bool) -> Stream:
    """Our trainer's status.json as the monitor reads it: a `step` event when the step, phase or phase
    progress moved, a `status` event per rewrite (every 10 s, a heartbeat at least)."""
    s = Stream(name)
    pos: dict[str, object] = {"step": 0.0, "phase": "starting", "phase_done": 0.0}
    next_beat = [0.0]

    def move(t: float, step: int, phase: str, done: float = 0.0) -> None:
        heartbeat(t)
        pos.update(step=float(step), phase=phase, phase_done=done)
        s.add(t, "step", float(step), {"phase": phase, "phase_done": done})
        s.add(t, "status", float(step), {"phase": phase, "phase_done": done})

    def heartbeat(until: float) -> None:
        while next_beat[0] < until:
            snapshot = {k: pos[k] for k in ("phase", "phase_done")}
            s.add(next_beat[0], "status", float(str(pos["step"])), snapshot)
            next_beat[0] += 10.0

    t = 30.0
    move(t, 0, "starting")
    t = rng.uniform(300, 900) if irregular else 300.0
    for step in range(1, steps + 1):
        gen = rng.uniform(30, 60) if irregular else _jitter(rng, 40.0, 0.05)
        train = rng.uniform(15, 30) if irregular else _jitter(rng, 20.0, 0.05)
        if irregular and step <= 2:
            gen *= rng.uniform(3, 5)
        move(t, step - 1, "generating")
        done, g = 0.0, t + rng.uniform(2, 10)
        while g < t + gen:
            if hang_step == step and done >= 4:
                heartbeat(g + 3600)
                s.hung_at, s.end = _last_move(s), g + 3600
                return s
            done += 1
            move(g, step - 1, "generating", done)
            g += rng.uniform(2, 10) if irregular else 5.0
        t += gen
        move(t, step - 1, "training")
        if irregular and rng.random() < 1 / 25:
            train += rng.uniform(
                60, 240
            )  # the data loader refills its shards: training shows nothing meanwhile
        t += train
        move(t, step, "training")
        if irregular and step % 10 == 0:
            move(t, step, "validating")
            v_end, b, k = t + rng.uniform(240, 360), t, 0.0
            while (b := b + rng.uniform(20, 60)) < v_end:
                k += 1
                move(b, step, "validating", k)
            t = v_end
        if irregular and step % 20 == 0:
            move(t, step, "checkpointing")
            t += rng.uniform(120, 360)
    move(t, steps, "finished")
    s.end = t
    return s


def _last_move(s: Stream) -> float:
    return max(t for t, key, _, _ in s.events if key == "step")


def streams(seeds: int, steps: int) -> Iterator[Stream]:
    yield banners("hung-banners", random.Random(50), 60, 60.0, 50, irregular=False)
    yield status_json("hung-status", random.Random(51), 60, 50, irregular=False)
    for seed in range(seeds):
        yield banners(
            f"healthy-banners-{seed}", random.Random(1000 + seed), steps, 60.0, None, irregular=True
        )
        yield status_json(f"healthy-status-{seed}", random.Random(2000 + seed), steps, None, irregular=True)
        yield banners(
            f"healthy-growing-{seed}", random.Random(3000 + seed), steps, None, None, irregular=True
        )


# ---- the replay ----------------------------------------------------------------------------------------
def replay(rs: RuleSet, s: Stream, tick_s: float) -> list[float]:
    """When the stall rule fired (times), feeding the stream and the clock the way the monitor does."""
    st = MatcherState(run_id=RUN, attempt=1)
    feed(rs, st, StateEvent(RUN, 1, "50001", JobState.RUNNING, nodes="node1", at=0.0))
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log", "status.json"])
    fired: list[float] = []
    now = 0.0
    for t, key, value, detail in sorted(s.events, key=lambda e: e[0]):
        while now + tick_s <= t:
            now += tick_s
            fired += [now for m in feed(rs, st, Tick(now)) if m.rule == RULE]
        fired += [
            t for m in feed(rs, st, ProgressEvent(RUN, 1, key, value, at=t, detail=detail)) if m.rule == RULE
        ]
        now = max(now, t)
    while now + tick_s <= s.end:
        now += tick_s
        fired += [now for m in feed(rs, st, Tick(now)) if m.rule == RULE]
    return fired


def fixed_ruleset(tmp: Path) -> RuleSet:
    """The baseline: the shipped rules with the stall rule's `learn:` line removed (the fixed 30 min)."""
    text = DEFAULT_RULES_PATH.read_text()
    fixed = re.sub(r"^\s+learn: \{[^}]*\}\n", "", text, flags=re.M)
    assert fixed != text, "supervisor/rules/defaults/default.yaml has no `learn:` line to remove"
    path = tmp / "fixed.yaml"
    path.write_text(fixed)
    return load_ruleset([path], use_default=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--healthy-seeds", type=int, default=8)
    ap.add_argument("--healthy-steps", type=int, default=300)
    ap.add_argument("--tick-s", type=float, default=1.0)  # the monitor ticks every second
    ap.add_argument("--save-streams", type=Path, default=None)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    learnt = load_ruleset()
    with tempfile.TemporaryDirectory() as tmp:
        fixed = fixed_ruleset(Path(tmp))
    rows: list[dict[str, object]] = []
    for s in streams(args.healthy_seeds, args.healthy_steps):
        if args.save_streams is not None:
            args.save_streams.mkdir(parents=True, exist_ok=True)
            with (args.save_streams / f"{s.name}.jsonl").open("w") as f:
                for t, key, value, detail in s.events:
                    f.write(
                        json.dumps({"t": round(t, 3), "key": key, "value": value, "detail": detail}) + "\n"
                    )
        row: dict[str, object] = {"stream": s.name, "hours": round(s.end / 3600, 2)}
        for label, rs in (("learnt", learnt), ("fixed", fixed)):
            fired = replay(rs, s, args.tick_s)
            if s.hung_at is None:
                row[f"{label}_false_alarms"] = len(fired)
            else:
                after = [f for f in fired if f >= s.hung_at]
                row[f"{label}_false_alarms"] = len(fired) - len(after)
                row[f"{label}_delay_s"] = round(after[0] - s.hung_at, 1) if after else None
        rows.append(row)
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    hung = [r for r in rows if str(r["stream"]).startswith("hung-")]
    healthy = [r for r in rows if str(r["stream"]).startswith("healthy-")]

    def worst(label: str) -> float | None:
        ds = [r.get(f"{label}_delay_s") for r in hung]
        return None if any(d is None for d in ds) else max(float(d) for d in ds)  # type: ignore[arg-type]

    delay, base = worst("learnt"), worst("fixed")
    fa = sum(int(r["learnt_false_alarms"]) for r in rows)  # type: ignore[call-overload]
    base_fa = sum(int(r["fixed_false_alarms"]) for r in rows)  # type: ignore[call-overload]
    last = {
        "detection_delay_s": delay,
        "baseline_detection_delay_s": base,
        "speedup": round(base / delay, 2) if delay and base else None,
        "false_alarms": fa,
        "baseline_false_alarms": base_fa,
        "healthy_streams": len(healthy),
        "healthy_hours": round(sum(float(r["hours"]) for r in healthy), 1),  # type: ignore[arg-type]
        "goal_met": delay is not None and delay <= GOAL_S and fa == 0,
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps({"params": vars(args), "streams": rows, "summary": last}, indent=2, default=str) + "\n"
        )
    print(json.dumps(last))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
