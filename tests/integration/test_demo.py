"""The README's first command, shortened: the demo must keep working end to end, and its report must price
the injected failure from the attempts' real times in the store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from supervisor.domain.runs import AttemptRow, DecisionRow
from supervisor.store import Store
from tests.support.daemon import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.ray]


def test_the_demo_detects_the_failure_resumes_and_completes(tmp_path: Path, slurm_cluster: Any) -> None:
    root = tmp_path / "demo"
    env = users_environment({**os.environ, **slurm_cluster.env})
    res = subprocess.run(
        [str(REPO / "scripts" / "demo"), "--steps", "24", "--root", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "hf-cache-not-shared" in out  # the failure was recognised
    assert "HF_HOME=" in out  # and fixed
    assert "attempt 2: Slurm job" in out and "restarted in place" in out  # inside the same job
    assert "validation accuracy" in out and "reward:" in out
    record = json.loads((root / "slack-record.json").read_text())
    texts = [m.get("text") or "" for m in record["messages"]]
    assert any("submitted" in t for t in texts) and any("completed" in t for t in texts)
    assert any("HF" in t for t in texts)  # the alert about the cache reached the thread
    # a healthy run: no RL training-health rule (supervisor/rules/defaults/default.yaml) said a word
    health = (
        "training diverged",
        "reward collapsed",
        "generation and training disagree",
        "gradient norm spike",
        "response length collapsed",
        "pinned at the length limit",
        "no learning signal",
        "validation regressed",
    )
    assert [t for t in texts if any(h in t for h in health)] == []
    assert (root / "reward.png").stat().st_size > 10_000
    # Preflight ran on the demo's paths, all on this machine's disks, and let them through because the dev
    # cluster's node is this machine: no --no-preflight, no SHEPHERD_PREFLIGHT__*, no spec `preflight: skip`.
    assert "preflight" not in (REPO / "scripts" / "demo").read_text().lower()
    assert "preflight" not in (root / "demo-grpo.yaml").read_text()

    check_the_report(root, record)


def users_environment(env: dict[str, str]) -> dict[str, str]:
    """What a user who runs the demo has: no Shepherd setting from outside (the demo sets its own), only the
    dev cluster's own knobs (SHEPHERD_DEV_*: which cluster `scripts/dev-cluster up` finds already up)."""
    return {k: v for k, v in env.items() if not k.startswith("SHEPHERD_") or k.startswith("SHEPHERD_DEV_")}


def check_the_report(root: Path, record: dict[str, Any]) -> None:
    """`shepherd report --json` against what the store recorded: every number of the injected failure."""
    (r,) = json.loads((root / "report.json").read_text())["runs"]
    store = Store.open_readonly(root / "shepherd" / "state" / "shepherd.sqlite3")
    a1, a2 = store.attempts(r["run"])
    assert a1.started_at and a1.ended_at and a2.started_at and a2.ended_at
    (d,) = [x for x in store.decisions(r["run"]) if x.rule == "hf-cache-not-shared"]
    steps = {(s.attempt, s.step): s.at for s in store.steps(r["run"])}
    written = {(m.attempt, m.step): m.at for m in store.marks(r["run"]) if m.kind == "checkpoint"}
    store.close()

    (f,) = r["failures"]
    assert (f["rule"], f["attempt"], r["attempts"], r["restarts"]) == ("hf-cache-not-shared", 1, 2, 1)
    assert r["failures_by_rule"] == {"hf-cache-not-shared": 1}
    # The fault strikes in step 12's training: step 11 was the last reached, step_10 the checkpoint resumed.
    assert a2.checkpoint is not None and a2.checkpoint.endswith("step_10")
    assert max(s for (n, s) in steps if n == 1) == 11 and f["steps_redone"] == 1
    seen = float(d.evidence["seen_at"])
    assert a1.started_at < seen <= d.at <= a2.intent_at
    stopped = min(seen, a1.ended_at)  # training ends at the failure (or the job's end, if it came first)
    assert f["detection_s"] == pytest.approx(d.at - stopped)  # the line read -> the decision
    # Restarted in place: attempt 2 is the next driver run of attempt 1's job, recorded when the runner was
    # told (its 5-s backoff is waited inside the job): no old job to end, no sbatch, no queue.
    assert a2.job_id == a1.job_id and a2.tag.startswith("inplace:1:")
    assert f["resubmit_s"] == pytest.approx(a2.intent_at - d.at)
    assert f["requeue_s"] == pytest.approx(a2.started_at - a2.intent_at) == 0
    kept_until = written.get((1, 10), steps[(1, 10)])  # step_10 written (its save included)
    assert f["redone_s"] == pytest.approx(stopped - kept_until) and f["redone_s"] > 0
    assert f["bring_up_s"] > 0 and f["gpu_hours"] > 0
    assert r["gpu_unit"] == "node" and r["gpus"] == 1  # the demo asks for no GPUs: node-hours
    assert r["wall_s"] == pytest.approx(a2.ended_at - a1.intent_at)
    assert sum(r["seconds"].values()) == pytest.approx(r["wall_s"])
    running = (min(a1.ended_at, a2.intent_at) - a1.started_at) + (a2.ended_at - a2.started_at)
    assert r["allocated_gpu_hours"] == pytest.approx(running / 3600)
    assert 0 < r["goodput"] < 1 and r["seconds"]["productive"] > r["seconds"]["redone"]
    _attempts_in_order(a1, a2, d)
    # The timeline picture reached the run's thread, and `-o` drew the same kind of picture.
    titles = [f["title"] for u in record["completed_uploads"] for f in u["files"]]
    assert any(t.startswith("demo-grpo: timeline (goodput ") for t in titles), titles
    assert (root / "timeline.png").stat().st_size > 10_000
    # The daemon's metrics for node_exporter parse with Prometheus' own parser.
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families((root / "metrics" / "shepherd.prom").read_text())
        for s in fam.samples
    }
    assert samples[("shepherd_attempts_total", ())] == 2
    assert samples[("shepherd_failures_total", (("rule", "hf-cache-not-shared"),))] == 1
    assert samples[("shepherd_slurm_commands_total", (("command", "sbatch"), ("outcome", "ok")))] == 1


def _attempts_in_order(a1: AttemptRow, a2: AttemptRow, d: DecisionRow) -> None:
    """The store's own times tell one story: submitted, started, decided, restarted in place, ended."""
    assert a1.started_at is not None and a2.started_at is not None and a2.ended_at is not None
    # Starts and ends are Slurm's: whole seconds, so a start in its intent's second reads as the intent.
    assert a1.intent_at <= a1.started_at < d.at <= a2.intent_at <= a2.started_at <= a2.ended_at
