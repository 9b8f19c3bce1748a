"""The monitor feeds TensorBoard scalars to metric rules when the trainer writes no metrics.jsonl (NeMo RL).

Event files (and metrics.jsonl) are read from cursors saved in the store after dispatch: more scalars give
only the new events, a restarted daemon neither re-fires old scalars nor misses new ones, and metrics.jsonl,
when present, is the only source (no double events).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.daemon.compose import Built, build
from supervisor.daemon.monitor import AttemptWatch, Monitor
from supervisor.domain.observations import MetricEvent
from supervisor.rules.engine import Match
from supervisor.settings import Settings

torch_tb = pytest.importorskip("torch.utils.tensorboard", reason="needs torch's SummaryWriter")

RULES = """\
rules:
  - name: reward-nan
    description: the reward is NaN
    trigger: {kind: metric, tag: "train:reward*", condition: nan}
    actions: [{alert: {level: error}}]
"""
RUN = "nrl-20260101-000000-abcd"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def root(tmp_path: Path) -> Path:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    settings = Settings(root=tmp_path / "root")
    built = build(settings)
    spec = {
        "name": "nrl",
        "command": ["true"],
        "trainer_log_dir": str(tmp_path / "logs"),
        "rules": {"files": [str(rules)]},
    }
    store = built.daemon.store
    store.create_run(RUN, "nrl", json.dumps(spec), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {})
    store.attempt_submitted(RUN, 1, "4242")
    intent = store.get_attempt(RUN, 1).intent_at  # type: ignore[union-attr]
    store.observe_attempt(
        RUN, 1, slurm_state="RUNNING", reason=None, nodes="node1", started=True, started_at=intent
    )
    store.close()
    return tmp_path


class Daemon:
    """A daemon process's monitor over the store under `root` (a new one per "restart")."""

    def __init__(self, root: Path) -> None:
        self.built: Built = build(Settings(root=root / "root"))
        self.clock = Clock()
        b = self.built
        self.monitor = Monitor(b.store, b.settings, b.actions, b.heartbeats, clock=self.clock)
        store = b.store
        run, attempt = store.get_run(RUN), store.get_attempt(RUN, 1)
        assert run is not None and attempt is not None
        w = self.monitor.watch_for(run, attempt)
        assert w is not None
        self.w: AttemptWatch = w

    def tick(self) -> list[Match]:
        """What one tick of the monitor does for the attempt (re-listing files every REFRESH_EVERY_S)."""
        self.clock.now += 11
        self.monitor.sync()
        matches = self.monitor.read_trainer(self.w)
        anyio.run(self.monitor.dispatch, self.w, matches)
        return matches

    def events(self) -> list[MetricEvent]:
        assert self.w.spec.trainer_log_dir is not None
        self.clock.now += 11
        self.monitor.sync()
        out = self.monitor.read_metrics(self.w, self.w.spec.trainer_log_dir, self.clock.now)
        self.monitor.persist_cursors()
        return out

    def close(self) -> None:
        self.built.daemon.store.close()


@pytest.fixture
def daemon(root: Path) -> Iterator[Daemon]:
    d = Daemon(root)
    yield d
    d.close()


def tb_dir(root: Path, exp: int = 1) -> Path:
    d = root / "logs" / f"exp_{exp:03d}" / "tensorboard"
    d.mkdir(parents=True, exist_ok=True)
    return d


def writer(root: Path, exp: int = 1, **kw: Any) -> Any:
    return torch_tb.SummaryWriter(log_dir=str(tb_dir(root, exp)), **kw)


def log(w: Any, step: int, reward: float) -> None:
    w.add_scalar("train/reward", reward, step)
    w.add_scalar("train/loss", 1.0 / step, step)
    w.flush()


def points(events: list[MetricEvent]) -> list[tuple[str, int]]:
    return [(e.tag, e.step) for e in events]


def test_a_metric_rule_fires_from_tensorboard_only_files(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, 0.5)
    log(tb, 2, float("nan"))
    tb.close()
    matches = daemon.tick()
    # NeMo RL's TensorBoard tags reach the rules under Shepherd's names: the default nan-loss fires too.
    assert sorted(m.rule for m in matches) == ["nan-loss", "reward-nan"]
    [mine] = [m for m in matches if m.rule == "reward-nan"]
    assert "train:reward = nan at step 2" in mine.reason
    acted = {d.rule: d.action for d in daemon.built.daemon.store.decisions(RUN)}
    assert acted["reward-nan"] == "none" and acted["nan-loss"] != "none"  # one incident, the stronger rule
    assert daemon.w.progress["metrics"] == {
        "train:reward": pytest.approx(math.nan, nan_ok=True),
        "train:loss": 0.5,
        "step": 2,
    }


def test_appended_scalars_give_only_new_events(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, 0.1)
    assert points(daemon.events()) == [("train:reward", 1), ("train:loss", 1)]
    assert daemon.events() == []
    log(tb, 2, 0.2)
    log(tb, 3, 0.3)
    assert points(daemon.events()) == [
        ("train:reward", 2),
        ("train:loss", 2),
        ("train:reward", 3),
        ("train:loss", 3),
    ]
    tb.close()
    assert daemon.events() == []


def test_cursors_are_saved_only_after_dispatch(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, 0.1)
    tb.close()
    [path] = [str(p) for p in tb_dir(root).iterdir()]
    store = daemon.built.daemon.store
    matches = daemon.monitor.read_trainer(daemon.w)
    assert store.load_cursor(path) is None
    anyio.run(daemon.monitor.dispatch, daemon.w, matches)
    saved = store.load_cursor(path)
    assert saved is not None and saved[1] == Path(path).stat().st_size
    assert saved[0] == Path(path).stat().st_ino


def test_a_restarted_daemon_does_not_refire_old_scalars_but_sees_new_ones(root: Path) -> None:
    tb = writer(root)
    log(tb, 1, 0.1)
    log(tb, 2, float("nan"))
    first = Daemon(root)
    assert sorted(m.rule for m in first.tick()) == ["nan-loss", "reward-nan"]
    first.close()  # the daemon stops; the trainer goes on

    log(tb, 3, 0.3)
    second = Daemon(root)
    assert points(second.events()) == [("train:reward", 3), ("train:loss", 3)]
    assert second.tick() == []  # a fresh matcher state: an old NaN read again would fire here
    log(tb, 4, float("nan"))
    tb.close()
    assert sorted(m.rule for m in second.tick()) == ["nan-loss", "reward-nan"]
    second.close()


def test_new_event_files_of_a_resumed_attempt_are_picked_up(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, 0.1)
    log(tb, 2, 0.2)
    tb.close()
    assert len(daemon.events()) == 4
    resumed = writer(root, purge_step=2)  # a new file in the same folder, as after a resume
    log(resumed, 2, 0.25)
    resumed.close()
    assert points(daemon.events()) == [("train:reward", 2), ("train:loss", 2)]
    nemo = writer(root, exp=2)  # NeMo RL: a new launch writes a new exp_NNN
    log(nemo, 3, 0.3)
    nemo.close()
    assert points(daemon.events()) == [("train:reward", 3), ("train:loss", 3)]
    assert daemon.events() == []


def test_a_torn_tail_waits_for_its_bytes(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, 0.1)
    log(tb, 2, 0.2)
    tb.close()
    [f] = list(tb_dir(root).iterdir())
    full = f.read_bytes()
    f.write_bytes(full[:-9])  # the last record cut short, as while the writer is flushing
    seen = points(daemon.events())
    assert seen == [("train:reward", 1), ("train:loss", 1), ("train:reward", 2)]
    with open(f, "ab") as fh:
        fh.write(full[-9:])
    assert points(daemon.events()) == [("train:loss", 2)]


def test_metrics_jsonl_wins_and_tensorboard_is_not_double_counted(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, float("nan"))
    tb.close()
    jsonl = root / "logs" / "exp_001" / "metrics.jsonl"
    jsonl.write_text(json.dumps({"step": 1, "train/reward": float("nan"), "train/loss": 1.0}) + "\n")
    matches = daemon.tick()
    assert sorted(m.rule for m in matches) == ["nan-loss", "reward-nan"]  # the default NaN rule too
    assert points(daemon.events()) == []
    with open(jsonl, "a") as fh:
        fh.write(json.dumps({"step": 2, "train/reward": 0.2}) + "\n")
    assert points(daemon.events()) == [("train:reward", 2)]
    [event_file] = list(tb_dir(root).iterdir())
    assert daemon.built.daemon.store.load_cursor(str(event_file)) is None  # never read


def test_once_tensorboard_was_fed_a_later_metrics_jsonl_is_not_read_too(root: Path, daemon: Daemon) -> None:
    tb = writer(root)
    log(tb, 1, 0.1)
    assert len(daemon.events()) == 2
    jsonl = root / "logs" / "exp_001" / "metrics.jsonl"
    jsonl.write_text(json.dumps({"step": 1, "train/reward": 0.1}) + "\n")
    log(tb, 2, 0.2)
    tb.close()
    assert points(daemon.events()) == [("train:reward", 2), ("train:loss", 2)]


def test_the_nemo_rl_stand_ins_event_files_are_real_and_seen(root: Path, daemon: Daemon) -> None:
    """The stand-in of tests/integration/test_nemo_rl.py: read by tensorboard's protos and the monitor."""
    from tensorboard.compat.proto import event_pb2

    from supervisor.watch.tbevents import split_records

    standin = Path(__file__).resolve().parents[1] / "support" / "nemo_rl_standin.py"
    argv = [f"checkpointing.checkpoint_dir={root / 'ck'}", f"logger.log_dir={root / 'logs'}"]
    subprocess.run([sys.executable, str(standin), *argv, "--steps", "4", "--nan-at", "3"], check=True)
    [f] = list(tb_dir(root).iterdir())
    records, used, problem = split_records(f.read_bytes(), verify_data=True)
    assert (used, problem) == (f.stat().st_size, "")
    protos = [event_pb2.Event.FromString(r) for r in records]
    assert protos[0].file_version == "brain.Event:2"
    assert [(p.step, v.tag) for p in protos[1:] for v in p.summary.value][:2] == [
        (1, "train/reward"),
        (1, "train/loss"),
    ]
    [m] = [m for m in daemon.tick() if m.rule == "reward-nan"]
    assert "at step 3" in m.reason


def test_an_ended_attempt_leaves_the_next_attempts_exp_dir_alone(root: Path, daemon: Daemon) -> None:
    """Seen in CI: attempt 1's watch, still draining, took attempt 2's NaN from exp_002 (cursors are per
    file), so attempt 2 never saw it. An ended attempt reads only the files it already knew."""
    tb = writer(root, exp=1)
    log(tb, 1, 0.1)
    tb.close()
    assert len(daemon.events()) == 2
    daemon.w.ended_at = daemon.clock.now  # attempt 1 ended; the resume starts a new NeMo RL exp dir
    nan = writer(root, exp=2)
    log(nan, 28, float("nan"))
    nan.close()
    assert daemon.events() == []
    path = str(next(tb_dir(root, 2).iterdir()))
    assert daemon.built.daemon.store.load_cursor(path) is None  # left whole for attempt 2's watch


def test_a_restarted_daemon_reads_metrics_jsonl_from_where_it_stopped(root: Path) -> None:
    exp = root / "logs" / "exp_001"
    exp.mkdir(parents=True)
    jsonl = exp / "metrics.jsonl"
    jsonl.write_text(
        json.dumps({"step": 1, "train/reward": 0.1}) + "\n" + json.dumps({"step": 2, "train/reward": 0.2})
    )
    first = Daemon(root)
    assert points(first.events()) == [("train:reward", 1)]  # step 2's line is not finished yet
    first.close()

    with open(jsonl, "a") as fh:
        fh.write("\n" + json.dumps({"step": 3, "train/reward": 0.3}) + "\n")
    second = Daemon(root)
    assert [s for _, s in points(second.events())] == [2, 3]  # neither step 1 again nor a half line
    assert second.events() == []
    second.close()
