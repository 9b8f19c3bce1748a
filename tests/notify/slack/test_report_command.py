"""`/shepherd report RUN` end to end, without Slurm: the daemon's own control path over a run whose history
is in the store, the real slack-sdk, and the stand-in recording the files upload v2 calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from supervisor.daemon.compose import build
from supervisor.domain.notices import Notice
from supervisor.notify.slack.handler import audit_log
from supervisor.settings import Settings
from supervisor.store import Store
from supervisor.testing.slack_standin import SlackStandin
from tests.cli.test_report import RUN, write_history
from tests.notify.conftest import ALICE, BOB, CAROL, CHANNEL, make_settings
from tests.notify.slack.test_socket_mode import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture
async def settings(tmp_path: Path, standin: SlackStandin) -> AsyncIterator[Settings]:
    settings = Settings(root=tmp_path / "root", slack=make_settings(standin))
    settings.ensure_dirs()
    write_history(settings.root)  # a crash in step 12, a resume from step_10, completed
    store = Store(settings.db_path)
    built = build(settings, store=store)
    svc = built.slack
    assert svc is not None
    task = asyncio.create_task(svc.run())
    await standin.wait_connected()
    built.sink.publish(Notice(RUN, "opened", "toy submitted", fields={"name": "toy"}))
    await eventually(lambda: len(standin.top_level()) == 1)
    try:
        yield settings
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.close()


async def test_report_answers_with_the_goodput_and_posts_the_timeline_into_the_thread(
    settings: Settings, standin: SlackStandin
) -> None:
    await standin.wait_ack(await standin.send_slash("/shepherd", "report toy", ALICE, CHANNEL))
    await eventually(lambda: standin.rec.ephemerals, within=30)  # the first drawing imports matplotlib
    reply = standin.rec.ephemerals[0]["text"]
    assert reply.startswith(f"{RUN}: goodput 62.8% of 0.42 GPU-hours") and "hf-cache-not-shared x1" in reply
    assert "lost: work redone 5.0s" in reply and "on its way into its thread" in reply
    await eventually(lambda: standin.rec.completed_uploads, within=10)
    ((_fid, upload),) = standin.rec.uploads.items()
    png = settings.runs_dir / RUN / "timeline.png"
    assert upload["data"][:8] == b"\x89PNG\r\n\x1a\n" and upload["data"] == png.read_bytes()
    (done,) = standin.rec.completed_uploads
    (opener,) = standin.top_level()
    assert done["thread_ts"] == opener["ts"] and done["channel_id"] == CHANNEL
    assert done["files"][0]["title"].startswith("toy: timeline (goodput 62.8%")
    (entry,) = audit_log(Store(settings.db_path).db)
    assert (entry["user_id"], entry["action"], entry["run"], entry["outcome"]) == (
        ALICE,
        "report",
        "toy",
        "ok",
    )


async def test_readers_may_ask_strangers_and_unknown_runs_get_clear_answers(
    settings: Settings, standin: SlackStandin
) -> None:
    for n, (user, text) in enumerate(((BOB, "report toy"), (CAROL, "report ghost")), start=1):
        await standin.wait_ack(await standin.send_slash("/shepherd", text, user, CHANNEL))
        await eventually(lambda n=n: len(standin.rec.ephemerals) == n)  # type: ignore[misc]
    replies = [e["text"] for e in standin.rec.ephemerals]
    assert "Sorry" in replies[0] and "no run called 'ghost'" in replies[1]
    await asyncio.sleep(0.3)
    assert standin.rec.uploads == {} and not (settings.runs_dir / RUN / "timeline.png").exists()
    assert json.dumps(audit_log(Store(settings.db_path).db)).count('"report"') == 2
