"""`/shepherd plot RUN` end to end, without Slurm: the daemon's own control path, a run in the store
with a metrics.jsonl on disk, and the stand-in recording the files upload v2 calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from supervisor.daemon.compose import build
from supervisor.domain.notices import Notice
from supervisor.notify.slack.handler import audit_log
from supervisor.notify.slack.service import SlackService
from supervisor.settings import Settings
from supervisor.store import Store
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.conftest import ALICE, BOB, CAROL, CHANNEL, make_settings
from tests.notify.slack.test_socket_mode import eventually

pytestmark = pytest.mark.anyio

RUN = "gsm8k-20261121-000000-abcd"
EARLY = "early-20261121-000000-beef"  # no metrics written yet


@dataclass
class Daemonish:
    store: Store
    service: SlackService
    settings: Settings


def _write_metrics(log_dir: Path, steps: int = 40) -> None:
    exp = log_dir / "exp_001"
    exp.mkdir(parents=True)
    rows = [
        {"step": s, "train/reward_mean": 0.2 + 0.01 * s, "train/reward_std": 0.1}
        | ({"val/accuracy": 0.1 + 0.005 * s} if s % 10 == 0 else {})
        for s in range(steps)
    ]
    (exp / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
async def daemonish(tmp_path: Path, standin: SlackStandin) -> AsyncIterator[Daemonish]:
    settings = Settings(root=tmp_path / "root", slack=make_settings(standin))
    settings.ensure_dirs()
    store = Store(settings.db_path)
    _write_metrics(tmp_path / "logs")
    spec = {"name": "gsm8k", "command": ["true"], "trainer_log_dir": str(tmp_path / "logs")}
    store.create_run(RUN, "gsm8k", json.dumps(spec), "spec.yaml")
    store.create_run(EARLY, "early", json.dumps({"name": "early", "command": ["true"]}), "spec.yaml")
    built = build(settings, store=store)  # the daemon's own wiring of Slack, its sink and run control
    svc = built.slack
    assert svc is not None
    task = asyncio.create_task(svc.run())
    await standin.wait_connected()
    for run_id, name in ((RUN, "gsm8k"), (EARLY, "early")):
        built.sink.publish(Notice(run_id, "opened", f"{name} submitted", fields={"name": name}))
    await eventually(lambda: len(standin.top_level()) == 2)
    try:
        yield Daemonish(store, svc, settings)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.close()


def _thread_ts(standin: SlackStandin, run_id: str) -> str:
    (opener,) = [m for m in standin.top_level() if run_id in json.dumps(m)]
    return str(opener["ts"])


async def test_plot_from_an_allowed_user_uploads_a_png_into_the_runs_thread(
    daemonish: Daemonish, standin: SlackStandin
) -> None:
    await standin.wait_ack(await standin.send_slash("/shepherd", "plot gsm8k", ALICE, CHANNEL))
    await eventually(lambda: standin.rec.ephemerals)
    reply = standin.rec.ephemerals[0]
    assert reply["user"] == ALICE and "on their way into its thread" in reply["text"], reply
    await eventually(lambda: standin.rec.completed_uploads, within=10)
    ((fid, upload),) = standin.rec.uploads.items()
    png = daemonish.settings.runs_dir / RUN / "curves.png"  # where `shepherd plot` draws it too
    assert upload["data"][:8] == b"\x89PNG\r\n\x1a\n" and upload["data"] == png.read_bytes()
    (done,) = standin.rec.completed_uploads
    assert done["thread_ts"] == _thread_ts(standin, RUN) and done["channel_id"] == CHANNEL
    assert done["files"][0]["id"] == fid and done["files"][0]["title"] == "gsm8k: reward and validation"
    (entry,) = audit_log(daemonish.store.db)
    assert (entry["user_id"], entry["action"], entry["run"], entry["outcome"]) == (
        ALICE,
        "plot",
        "gsm8k",
        "ok",
    )


async def test_status_readers_may_plot_strangers_are_refused_and_nothing_is_uploaded(
    daemonish: Daemonish, standin: SlackStandin
) -> None:
    await standin.wait_ack(await standin.send_slash("/shepherd", f"plot {RUN}", BOB, CHANNEL))
    await eventually(lambda: standin.rec.ephemerals)
    assert standin.rec.ephemerals[0]["user"] == BOB and "Sorry" in standin.rec.ephemerals[0]["text"]
    await asyncio.sleep(0.3)
    assert standin.rec.uploads == {} and standin.rec.completed_uploads == []
    assert not (daemonish.settings.runs_dir / RUN / "curves.png").exists()
    assert audit_log(daemonish.store.db)[0]["outcome"] == "refused"

    await standin.wait_ack(await standin.send_slash("/shepherd", f"plot {RUN}", CAROL, CHANNEL))
    await eventually(lambda: standin.rec.completed_uploads, within=10)
    assert standin.rec.completed_uploads[0]["thread_ts"] == _thread_ts(standin, RUN)


async def test_unknown_runs_and_runs_without_metrics_get_clear_answers(
    daemonish: Daemonish, standin: SlackStandin
) -> None:
    for n, text in enumerate(("plot ghost", "plot early", "plot"), start=1):
        await standin.wait_ack(await standin.send_slash("/shepherd", text, ALICE, CHANNEL))
        await eventually(lambda n=n: len(standin.rec.ephemerals) == n)  # type: ignore[misc]
    replies = [e["text"] for e in standin.rec.ephemerals]
    assert "no run called 'ghost'" in replies[0]
    assert f"{EARLY} has no metrics yet, so there is nothing to plot" in replies[1]
    assert "usage: `/shepherd plot <run>`" in replies[2]
    await asyncio.sleep(0.3)
    assert standin.rec.uploads == {}
    assert [e["outcome"] for e in reversed(audit_log(daemonish.store.db))] == [
        "rejected",
        "rejected",
        "bad_request",
    ]
