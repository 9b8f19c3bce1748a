"""NeMo RL's driver log read as progress and metrics: its `Step N/M` banners, printed result blocks and
`Saving checkpoint` lines are there even when no metrics backend is on (TensorBoard is off in NeMo RL's
shipped configs), so a run without TensorBoard still shows reward, accuracy and steps.

What NeMo RL prints (nemo_rl/algorithms/grpo.py, read from its source):

    ========================= Step 3/100 =========================
    📊 Training Results:
      • Loss: 0.0123
      • Avg Reward: 0.4100
    ⏱️  Timing:
      • Total step time: 12.34s
    ▶ Starting validation at step 10...
    📊 Validation Results:
        • Accuracy: 0.5300
    Saving checkpoint for step 10...
    Timeout has been reached, stopping training early

Pure and line by line: the monitor feeds the lines its tailer reads, `parse_file` reads a whole file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from supervisor.watch.metric_names import canonical

BANNER_RE = re.compile(r"={5,} Step (\d+)/(\d+) ={5,}")
VALIDATION_AT_RE = re.compile(r"Starting validation at step (\d+)")
SAVING_RE = re.compile(r"Saving checkpoint for step (\d+)")
BLOCK_RE = re.compile(r"(Training Results|Validation Results|Timing):\s*$")
ITEM_RE = re.compile(r"^\s*•\s*([^:]{1,80}):\s*(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)")
DEADLINE_LINE = "Timeout has been reached, stopping training early"
MAX_STEPS_LINE = "Max number of steps has been reached, stopping training early"
EARLY_STOP_RE = re.compile(r"reached the early-stop threshold .*; stopping training")


@dataclass(frozen=True, slots=True)
class StepStarted:
    step: int
    total: int


@dataclass(frozen=True, slots=True)
class Scalar:
    name: str  # Shepherd's metric name
    step: int
    value: float


@dataclass(frozen=True, slots=True)
class CheckpointSaving:
    step: int


@dataclass(frozen=True, slots=True)
class ValidationStarted:
    """`Starting validation at step N`: the validation phase begins (progress that names its phase)."""

    step: int


@dataclass(frozen=True, slots=True)
class Stopped:
    """How the loop ended: `deadline` (checkpoint_must_save_by ran out), `max_steps` or `early_stop`."""

    why: str


Item = StepStarted | Scalar | CheckpointSaving | ValidationStarted | Stopped


class DriverLogReader:
    """Remembers the step and the open result block between lines; one per attempt's driver log."""

    def __init__(self) -> None:
        self.step = 0
        self.total = 0
        self.block: str | None = None
        self.block_step = 0
        self.validation_step = 0

    def feed(self, line: str) -> list[Item]:
        if self.block is not None:
            item = ITEM_RE.match(line)
            if item is not None:
                return self._scalar(item.group(1).strip(), item.group(2))
            if line.strip():  # an unbulleted line closes the block; a blank one inside it is kept
                self.block = None
        if "Step " in line and (m := BANNER_RE.search(line)):
            self.step, self.total = int(m.group(1)), int(m.group(2))
            return [StepStarted(self.step, self.total)]
        if "validation at step" in line and (m := VALIDATION_AT_RE.search(line)):
            self.validation_step = int(m.group(1))
            return [ValidationStarted(self.validation_step)]
        if "Results:" in line or "Timing:" in line:
            m = BLOCK_RE.search(line)
            if m is not None:
                self.block = m.group(1)
                self.block_step = self.validation_step if self.block == "Validation Results" else self.step
            return []
        if "Saving checkpoint" in line and (m := SAVING_RE.search(line)):
            return [CheckpointSaving(int(m.group(1)))]
        if DEADLINE_LINE in line:
            return [Stopped("deadline")]
        if MAX_STEPS_LINE in line:
            return [Stopped("max_steps")]
        if "early-stop threshold" in line and EARLY_STOP_RE.search(line):
            return [Stopped("early_stop")]
        return []

    def _scalar(self, label: str, raw: str) -> list[Item]:
        assert self.block is not None
        try:
            value = float(raw)
        except ValueError:
            return []
        if not self.block_step:
            return []  # a block before any banner: no step to put it on
        return [Scalar(canonical("driver-log", f"{self.block}/{label}"), self.block_step, value)]


def read_lines(lines: Iterable[str]) -> Iterator[Item]:
    reader = DriverLogReader()
    for line in lines:
        yield from reader.feed(line)


def parse_file(path: Path, max_bytes: int = 64 * 1024 * 1024) -> list[Item]:
    """Everything a whole driver log says (its last `max_bytes`: a plot needs no more)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return list(read_lines(text.splitlines()))
