"""NeMo RL's driver log as progress and metrics (TensorBoard off): banners, result blocks, saves, stops."""

from __future__ import annotations

import math

from supervisor.watch.driver_log import CheckpointSaving, Scalar, StepStarted, Stopped, read_lines
from tests.watch.test_sources import NEMO_DRIVER_LOG


def test_banners_blocks_saves_and_the_stop_reason_are_read_in_order() -> None:
    items = list(read_lines(NEMO_DRIVER_LOG.splitlines()))
    assert items[0] == StepStarted(1, 2)
    assert Scalar("train:gen_kl_error", 1, 0.001) in items
    assert Scalar("train:mean_gen_tokens", 1, 12.0) in items
    assert Scalar("val:avg_length", 2, 10.5) in items  # the validation block's step is its own
    assert CheckpointSaving(2) in items and items[-1] == Stopped("max_steps")
    assert not any(isinstance(i, Scalar) and i.name.startswith("timing:generation") for i in items[:0])


def test_the_deadline_stop_and_a_nan_reward_are_seen() -> None:
    lines = [
        "========================= Step 7/100 =========================",
        "📊 Training Results:",
        "  • Loss: nan",
        "  • Avg Reward: nan",
        "Saving checkpoint for step 7...",
        "Timeout has been reached, stopping training early",
    ]
    items = list(read_lines(lines))
    rewards = [i for i in items if isinstance(i, Scalar) and i.name == "train:reward"]
    assert len(rewards) == 1 and rewards[0].step == 7 and math.isnan(rewards[0].value)
    assert items[-1] == Stopped("deadline")


def test_prefixed_and_unrelated_lines_do_not_make_metrics() -> None:
    lines = [
        "(DTensorPolicyWorker pid=1) • Loss: 3.0",  # a bullet outside any block
        "📊 Training Results:",  # a block before any banner has no step
        "  • Loss: 1.0",
        "========================= Step 1/3 =========================",
        "INFO some library: Loss: 9.9",
    ]
    assert [i for i in read_lines(lines) if isinstance(i, Scalar)] == []
