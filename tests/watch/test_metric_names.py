"""One mapping from each source's metric names to Shepherd's."""

from __future__ import annotations

import pytest

from supervisor.watch.metric_names import KNOWN, TRAIN_REWARD, VAL_ACCURACY, canonical


@pytest.mark.parametrize(
    ("source", "name", "want"),
    [
        ("tensorboard", "train/reward", TRAIN_REWARD),  # NeMo RL
        ("tensorboard", "validation/accuracy", VAL_ACCURACY),  # NeMo RL
        ("tensorboard", "train/reward_mean", TRAIN_REWARD),  # our trainer
        ("metrics.jsonl", "val/accuracy", VAL_ACCURACY),  # our trainer
        ("driver-log", "Training Results/Avg Reward", TRAIN_REWARD),  # NeMo RL with TensorBoard off
        ("driver-log", "Validation Results/Accuracy", VAL_ACCURACY),
        ("tensorboard", "train/token_mult_prob_error", "train:token_mult_prob_error"),
        ("tensorboard", "timing/train/total_step_time", "timing:total_step_time"),
    ],
)
def test_each_sources_name_maps_to_shepherds(source: str, name: str, want: str) -> None:
    assert canonical(source, name) == want  # type: ignore[arg-type]


def test_an_unmapped_scalar_keeps_a_readable_name_and_shepherds_names_pass_through() -> None:
    assert canonical("tensorboard", "train/policy/entropy") == "train:policy_entropy"
    assert canonical("tensorboard", "performance/tokens_per_sec") == "performance/tokens_per_sec"
    assert all(canonical("metrics.jsonl", n) == n for n in KNOWN)
