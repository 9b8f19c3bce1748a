"""A link found after the thread opened (the run's W&B page) is put in the thread's first message: in it
when it has not gone out yet, by editing it when it has, and as a line of its own where messages cannot be
edited (webhooks)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from supervisor.domain.notices import Notice
from supervisor.notify.slack.sink import SlackSink
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.slack.test_notifier import stack

pytestmark = pytest.mark.anyio

URL = "https://wandb.ai/team/grpo-math/runs/mey3t37m"


def opened(sink: SlackSink) -> None:
    sink.publish(Notice("a-1", "opened", "gsm8k-a submitted", fields={"name": "gsm8k-a", "job_id": "1001"}))


def wandb(url: str = URL) -> Notice:
    return Notice("a-1", "wandb", f"W&B run: {url}", fields={"url": url})


async def test_a_link_found_after_the_first_message_went_out_is_edited_into_it(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin)
    sink = SlackSink(notifier)
    opened(sink)
    await sender.drain()
    sink.publish(wandb())
    await sender.drain()
    (opener,) = standin.top_level()
    (update,) = standin.rec.updates
    assert update["ts"] == opener["ts"]
    assert f"W&amp;B run: <{URL}>" in json.dumps(update["blocks"])  # mrkdwn escapes the &
    assert "Slurm job" in json.dumps(update["blocks"])  # the rest of the first message is kept
    assert standin.thread(opener["ts"]) == []  # nothing new in the thread


async def test_a_link_known_before_the_first_message_went_out_is_in_it_and_a_newer_one_replaces_it(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin)
    sink = SlackSink(notifier)
    opened(sink)
    sink.publish(wandb("https://wandb.ai/team/grpo-math/runs/old"))
    sink.publish(wandb())
    await sender.drain()
    (opener,) = standin.top_level()
    blocks = json.dumps(opener["blocks"])
    assert URL in blocks and "runs/old" not in blocks
    assert standin.rec.updates == []


async def test_where_messages_cannot_be_edited_the_link_is_a_line_of_its_own(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin, mode="webhook")
    sink = SlackSink(notifier)
    opened(sink)
    await sender.drain()
    sink.publish(wandb())
    await sender.drain()
    assert standin.rec.updates == []
    first, link = standin.rec.webhooks
    assert URL not in json.dumps(first) and URL in link["text"]
