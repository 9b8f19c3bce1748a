"""bench/goodput.py keeps running on Shepherd's real decision code: its last line is the JSON the README
quotes, every strategy's goodput is a fraction, and Shepherd's stall rule catches the silent hangs the
others wait out until the time limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_goodput_benchmark_compares_the_three_strategies_on_the_real_decision_code() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO / "bench" / "goodput.py"), "--no-save"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.strip().splitlines()
    last = json.loads(lines[-1])
    assert set(last["goodput"]) == {"human", "poller", "shepherd"}
    assert all(0 < g < 1 for g in last["goodput"].values())
    assert last["goodput"]["human"] < last["goodput"]["poller"]  # the same resumes, later
    assert 0 < last["shepherd_overhead_fraction_of_mtbf"] < 1
    assert isinstance(last["shepherd_best_goodput"], bool) and last["hang_detection"] == "learnt"
    assert "the shipped rollouts-stalled rule" in res.stdout
    # the learnt bound (learnt from the steps fed before each hang) beats the old fixed 30 minutes
    fixed = last["with_fixed_hang_bound"]
    assert fixed["bound_s"] == 1800 and fixed["goodput"] < last["goodput"]["shepherd"]
    (hang,) = [line.split() for line in lines if line.strip().startswith("hang ")]
    human, poller, shepherd = (float(x.replace(",", "")) for x in hang[2:5])
    assert shepherd < poller / 5 and shepherd < human / 5  # detected by the stall rule, not the time limit
