"""The files a trainer writes that the supervisor reads, named once (NeMo RL's layout, which our trainer
follows); tests/domain/test_trainer_files.py pins that both sides agree."""

from __future__ import annotations

import re

# In the checkpoint dir: `tmp_step_N/` while saving, renamed to `step_N/` once complete.
STEP_DIR_RE = re.compile(r"^step_(\d+)$")
TMP_STEP_PREFIX = "tmp_step_"
INFO_FILE = "training_info.json"  # written last into a step: its presence marks a complete checkpoint
LATEST_STATUS_FILE = "latest_checkpoint_status.json"

# In the trainer's log dir: a new `exp_NNN/` per launch, holding `metrics.jsonl` and `tensorboard/`.
EXP_DIR_RE = re.compile(r"^exp_(\d+)$")
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
STATUS_FILE = "status.json"  # beside the exp dirs: the trainer's progress, replaced atomically
