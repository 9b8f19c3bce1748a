"""No single input blocks the event loop: while the monitor reads the worst log lines we know of (through
a rule whose regex is slow even in RE2, a bar regex that backtracked, stacked prefixes that did), the loop
keeps beating, the slow rule is quarantined, and a real failure after them is still detected."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from supervisor.daemon.compose import Built, build
from supervisor.daemon.monitor import AttemptWatch
from supervisor.rules.engine import Match
from supervisor.settings import Settings
from supervisor.slurm.launchers import layout

pytestmark = pytest.mark.timeout(300)  # a regression must fail, not hang CI

SLOW_RULE = """\
rules:
  - name: slow-but-linear
    trigger: {kind: log, regex: "a[ab]{400}x"}
    actions: [{alert: {level: warning}}]
"""
RUN = "hostile-20260101-000000-abcd"
JOB = "4242"


def worst_lines() -> list[str]:
    rng = random.Random(3)
    return [
        "".join(rng.choice("ab") for _ in range(60_000)),  # the slow rule: ~1 s of RE2 CPU on this line
        "1" * 60_000 + "it/s]",  # the tqdm regex backtracked for minutes on this
        "[rank1]:" * 30 + "!Traceback (most recent call last):",  # the traceback-prefix regex: minutes
        "*** JOB 1 ON n1 CANCELLED AT 2026 DUE TO TIME" + " " * 60_000 + "!",  # slurmstepd's regex: quadratic
        "CUDA out of memory warning " * 2_400,  # thousands of matches, each vetoed by its line
    ]


@pytest.fixture
def built(tmp_path: Path) -> Iterator[tuple[Built, AttemptWatch]]:
    rules = tmp_path / "slow.yaml"
    rules.write_text(SLOW_RULE)
    b = build(Settings(root=tmp_path / "root"))
    spec = {
        "name": "hostile",
        "command": ["true"],
        "log_dir": str(tmp_path / "logs"),
        "rules": {"files": [str(rules)]},
    }
    store = b.daemon.store
    store.create_run(RUN, "hostile", json.dumps(spec), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {})
    store.attempt_submitted(RUN, 1, JOB)
    (tmp_path / "logs").mkdir()
    run, attempt = store.get_run(RUN), store.get_attempt(RUN, 1)
    assert run is not None and attempt is not None
    w = b.monitor.watch_for(run, attempt)
    assert w is not None
    yield b, w
    store.close()


def write_log(w: AttemptWatch, lines: list[str]) -> Path:
    out = layout.output_file(w.log_base, w.job_id)
    with out.open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    return out


async def read_while_probing(
    b: Built, w: AttemptWatch, off_loop: bool
) -> tuple[list[Match], list[tuple[int, float]]]:
    """Read the attempt's log one line per call, with a probe task beating beside it; returns the matches
    and, for each read, how many times the probe ran during it and how long it took."""
    beats = 0
    during: list[tuple[int, float]] = []
    out: list[Match] = []

    async def probe() -> None:
        nonlocal beats
        while True:
            beats += 1
            b.heartbeats.beat_if_registered("probe")
            await anyio.sleep(0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(probe)
        await anyio.sleep(0.01)
        for line in [*worst_lines(), "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"]:
            write_log(w, [line])
            before, t0 = beats, time.perf_counter()
            if off_loop:
                async with b.monitor._reading:
                    out += await b.monitor._read_off_loop(w)
            else:
                out += b.monitor.read_files(w)  # what the monitor did before: on the event loop
            during.append((beats - before, time.perf_counter() - t0))
        tg.cancel_scope.cancel()
    return out, during


def test_the_loop_keeps_beating_while_the_worst_lines_are_read_and_the_failure_is_still_found(
    built: tuple[Built, AttemptWatch],
) -> None:
    b, w = built
    b.heartbeats.register("probe", 600.0)
    matches, during = anyio.run(read_while_probing, b, w, True)
    # the probe ran while each of the worst lines that took long was being read and matched; on the event
    # loop it could not have (see the next test). A read quicker than the loop's next turn may see no beat
    # (seen on a loaded machine: [460, 0, 1, ...]), so only the long ones are held to it.
    slowest = max(during, key=lambda d: d[1])
    assert all(n >= 1 for n, seconds in during if seconds > 0.25 or (n, seconds) == slowest), during
    assert "slow-but-linear" in w.rules.quarantined
    assert [m.rule for m in matches if not m.followup] == ["cuda-oom"]
    assert b.heartbeats.stale() == []


def test_reading_on_the_event_loop_would_have_starved_the_probe(built: tuple[Built, AttemptWatch]) -> None:
    b, w = built
    _matches, during = anyio.run(read_while_probing, b, w, False)
    assert during[0][0] == 0  # the contrast that makes the test above mean something
