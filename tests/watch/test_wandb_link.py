"""The run's W&B page is read from every form of wandb's `View run` line, and from nothing else."""

from __future__ import annotations

import pytest

from supervisor.watch.wandb_link import wandb_run_url

URL = "https://wandb.ai/team/grpo-math/runs/mey3t37m"


@pytest.mark.parametrize(
    "line",
    [
        f"wandb:  View run at {URL}",  # 0.12 to 0.15
        f"wandb: 🚀 View run at {URL}",  # 0.15, 0.16
        f"wandb: 🚀 View run gentle-sun-3 at: {URL}",  # 0.16 on, header and footer
        f"wandb: 🚀 View run \x1b[33mgentle-sun-3\x1b[0m at: \x1b[34m\x1b[4m{URL}\x1b[0m",  # coloured
        f"wandb: 🚀 View run x at: \x1b]8;;{URL}\x1b\\{URL}\x1b]8;;\x1b\\",  # an OSC 8 hyperlink
        f"wandb: Synced gentle-sun-3: {URL}",  # older footers
        f"(RayWorker pid=123) wandb: 🚀 View run gentle-sun-3 at: {URL}.",  # prefixed, trailing dot
    ],
)
def test_every_form_of_the_view_run_line_gives_the_runs_url(line: str) -> None:
    assert wandb_run_url(line) == URL


def test_a_self_hosted_servers_url_is_kept() -> None:
    url = "https://wandb.corp.example/team/p/runs/abc123"
    assert wandb_run_url(f"wandb: 🚀 View run a at: {url}") == url


@pytest.mark.parametrize(
    "line",
    [
        "wandb:  View project at https://wandb.ai/team/grpo-math",
        "wandb:  View sweep at https://wandb.ai/team/grpo-math/sweeps/7w9xi059",
        "wandb: Run data is saved locally in /lus/x/wandb/run-20251231_122128-11cqdt05",
        f"see {URL} for the run",  # not wandb's own line
        "wandb: Syncing run gentle-sun-3",
    ],
)
def test_other_lines_give_nothing(line: str) -> None:
    assert wandb_run_url(line) is None
