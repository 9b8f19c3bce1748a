"""Shepherd's metric names and the one mapping from each source's names to them, so status, watch, plots,
Slack and metric rules speak of `train:reward` whether it came from TensorBoard, metrics.jsonl or a log.

Shepherd's names are the ones NeMo RL users already write in `checkpointing.metric_name`: `<phase>:<name>`
with phase `train` or `val` (and `timing` for durations). A source name nobody mapped keeps a readable form
(`train/foo` -> `train:foo`, `validation/foo` -> `val:foo`), so new scalars still reach rules and plots.
"""

from __future__ import annotations

from typing import Literal

Source = Literal["tensorboard", "metrics.jsonl", "driver-log"]

TRAIN_REWARD = "train:reward"
TRAIN_REWARD_STD = "train:reward_std"
TRAIN_LOSS = "train:loss"
TRAIN_GRAD_NORM = "train:grad_norm"
TRAIN_GEN_KL_ERROR = "train:gen_kl_error"
TRAIN_TOKEN_MULT_PROB_ERROR = "train:token_mult_prob_error"
TRAIN_MEAN_GEN_TOKENS = "train:mean_gen_tokens"
TRAIN_ZERO_STD_FRACTION = "train:zero_std_fraction"  # groups whose samples all got the same reward
TRAIN_TRUNCATED_FRACTION = "train:truncated_fraction"  # samples that hit the generation limit unfinished
VAL_ACCURACY = "val:accuracy"
VAL_AVG_LENGTH = "val:avg_length"
STEP_TIME = "timing:total_step_time"

KNOWN = (
    TRAIN_REWARD,
    TRAIN_REWARD_STD,
    TRAIN_LOSS,
    TRAIN_GRAD_NORM,
    TRAIN_GEN_KL_ERROR,
    TRAIN_TOKEN_MULT_PROB_ERROR,
    TRAIN_MEAN_GEN_TOKENS,
    TRAIN_ZERO_STD_FRACTION,
    TRAIN_TRUNCATED_FRACTION,
    VAL_ACCURACY,
    VAL_AVG_LENGTH,
    STEP_TIME,
)

# Exact names each source uses where they differ from the generic rule below.
_EXACT: dict[Source, dict[str, str]] = {
    # NeMo RL's logger (`<prefix>/<name>`) and our trainer's TensorBoard tags.
    "tensorboard": {
        "train/reward_mean": TRAIN_REWARD,
        "train/reward_std": TRAIN_REWARD_STD,
        "train/mean_gen_tokens_per_sample": TRAIN_MEAN_GEN_TOKENS,
        "train/zero_variance_group_frac": TRAIN_ZERO_STD_FRACTION,
        "train/truncated_frac": TRAIN_TRUNCATED_FRACTION,
        "timing/train/total_step_time": STEP_TIME,
    },
    # Our trainer's exp_NNN/metrics.jsonl (the same scalars as its TensorBoard files).
    "metrics.jsonl": {
        "train/reward_mean": TRAIN_REWARD,
        "train/reward_std": TRAIN_REWARD_STD,
        "train/mean_gen_tokens_per_sample": TRAIN_MEAN_GEN_TOKENS,
        "train/zero_variance_group_frac": TRAIN_ZERO_STD_FRACTION,
        "train/truncated_frac": TRAIN_TRUNCATED_FRACTION,
        "timing/train/total_step_time": STEP_TIME,
    },
    # NeMo RL's printed blocks in ray-driver.log (📊 Training Results / Validation Results, ⏱️ Timing).
    "driver-log": {
        "Training Results/Loss": TRAIN_LOSS,
        "Training Results/Avg Reward": TRAIN_REWARD,
        "Training Results/Avg Total Reward": TRAIN_REWARD,
        "Training Results/Generation KL Error": TRAIN_GEN_KL_ERROR,
        "Training Results/Mean Generation Length": TRAIN_MEAN_GEN_TOKENS,
        "Validation Results/Accuracy": VAL_ACCURACY,
        "Validation Results/Average response length": VAL_AVG_LENGTH,
        "Timing/Total step time": STEP_TIME,
    },
}
_PREFIXES = (("train/", "train:"), ("validation/", "val:"), ("val/", "val:"), ("timing/train/", "timing:"))


def canonical(source: Source, name: str) -> str:
    """Shepherd's name for the scalar `name` as `source` spells it."""
    exact = _EXACT[source].get(name)
    if exact is not None:
        return exact
    if ":" in name:
        return name  # already Shepherd's (or NeMo RL's metric_name) spelling
    for prefix, phase in _PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return phase + name[len(prefix) :].replace("/", "_")
    return name
