"""The trainer <-> supervisor file contract: what the trainer's own writers put on disk, the supervisor's own
readers find (step_N, tmp_step_N, training_info.json, latest_checkpoint_status.json, exp_NNN, metrics.jsonl,
TensorBoard scalars, status.json). If either side renames a file or a key, this fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.decide.checkpoints import discover, list_checkpoint_dir
from supervisor.domain import trainer_files as tf
from supervisor.watch.progress import StatusReader
from supervisor.watch.sources import metric_points
from supervisor.watch.tbevents import TensorBoardWatcher, newest_exp_dir
from trainer.checkpoint import Checkpointer, RunInfo, tmp_dir_for
from trainer.config import CheckpointingConfig
from trainer.telemetry import MetricsLogger, StatusFile, new_exp_dir

pytest.importorskip("torch.utils.tensorboard", reason="the trainer's TensorBoard writer needs torch")


def test_what_the_trainer_writes_is_what_the_supervisor_reads(tmp_path: Path) -> None:
    ckpt_dir, log_dir = tmp_path / "ckpt", tmp_path / "logs"
    new_exp_dir(log_dir)  # an earlier launch
    exp = new_exp_dir(log_dir)
    status = StatusFile(log_dir / tf.STATUS_FILE, interval_s=60, base={"metric_name": "val:accuracy"})
    cfg = CheckpointingConfig(checkpoint_dir=str(ckpt_dir), keep_top_k=2, save_period=1)
    checkpointer = Checkpointer(
        cfg,
        ckpt_dir,
        RunInfo(total_steps=4, config_hash="h", exp_dir=exp.name),
        write_state=lambda tmp, step: (tmp / "weights.pt").write_bytes(b"w"),
        consumed=lambda: (8, 32),
        status=status,
        started_at=0.0,
    )
    metrics = MetricsLogger(exp, tensorboard=True, resume_step=None)
    accuracy = {1: 0.2, 2: 0.6, 3: 0.4}
    for step, acc in accuracy.items():
        logged = {"train/reward_mean": step / 10, "val/accuracy": acc}
        metrics.log(step, logged)
        status.update(step=step, total_steps=4)
        checkpointer.save(step, {"val:accuracy": acc}, last_step=False, stopping=False)
    metrics.close()
    tmp_dir_for(ckpt_dir, 4).mkdir()  # a save in progress when the supervisor looks

    found = discover(list_checkpoint_dir(ckpt_dir), "val:accuracy")
    assert [(c.name, c.metric) for c in found] == [("step_3", 0.4), ("step_2", 0.6)]  # top 2 + the latest
    assert all(tf.STEP_DIR_RE.match(c.name) for c in found)
    assert (ckpt_dir / f"{tf.TMP_STEP_PREFIX}4").is_dir() and "tmp_step_4" not in {c.name for c in found}
    latest = json.loads((ckpt_dir / tf.LATEST_STATUS_FILE).read_text())
    assert latest["step"] == 3 and Path(latest["path"]).name == "step_3"

    assert newest_exp_dir(log_dir) == exp and tf.EXP_DIR_RE.match(exp.name)
    assert (exp / tf.METRICS_FILE).is_file() and (exp / tf.TENSORBOARD_DIR).is_dir()
    points = set(metric_points(log_dir))
    assert ("val:accuracy", 2, 0.6) in points and ("train:reward", 3, 0.3) in points
    scalars = {(s.tag, s.step) for s in TensorBoardWatcher(log_dir).read()}
    assert {("val/accuracy", 1), ("train/reward_mean", 3)} <= scalars

    snapshot = StatusReader(log_dir / tf.STATUS_FILE).poll()
    assert snapshot is not None and snapshot.step == 3 and snapshot.total_steps == 4
    assert snapshot.last_checkpoint is not None and Path(snapshot.last_checkpoint).name == "step_3"
    status.close()
