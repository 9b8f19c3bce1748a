"""Whole runs without Ray: exact resume, interrupted checkpoints, graceful stop, exit codes, faults.

Each run is its own process; most are forked from one that imported torch already (tests/trainer/conftest.py's
`run_forked`), the rest are `python -m trainer` itself (`run_cli`)."""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path

import pytest

from tests.trainer.conftest import (
    read_metrics,
    read_status,
    run_cli,
    run_forked,
    start_forked,
    tiny_overrides,
)

IGNORED = ("time", "timing/", "performance/")


def _comparable(rows: list[dict[str, object]]) -> dict[int, dict[str, object]]:
    return {
        int(r["step"]): {k: v for k, v in r.items() if not k.startswith(IGNORED)}  # type: ignore[arg-type]
        for r in rows
    }


def test_stop_then_resume_reproduces_every_metric_exactly(tmp_path: Path) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    r = run_forked(
        tiny_overrides(straight, grpo__max_num_steps=8, grpo__val_period=4, checkpointing__save_period=4)
    )
    assert r.returncode == 0, r.stderr[-3000:]

    r1 = run_forked(
        tiny_overrides(
            split,
            grpo__max_num_steps=8,
            grpo__val_period=4,
            checkpointing__save_period=4,
            grpo__stop_at_step=4,
        )
    )
    assert r1.returncode == 75, r1.stderr[-3000:]
    assert read_status(split)["state"] == "stopped"
    assert (split / "ckpt" / "step_4" / "training_info.json").is_file()
    r2 = run_forked(
        tiny_overrides(split, grpo__max_num_steps=8, grpo__val_period=4, checkpointing__save_period=4)
    )
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert "resumed" in r2.stderr

    a, b = read_metrics(straight), read_metrics(split)
    assert [row["step"] for row in b] == list(range(0, 9))  # no doubled steps after the resume
    assert _comparable(a) == _comparable(b)
    assert read_status(split)["state"] == "finished"


def test_resumed_run_purges_tensorboard_events_after_the_checkpoint(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    base = tiny_overrides(tmp_path, grpo__max_num_steps=6, grpo__val_period=2)
    assert run_forked([*base, "grpo.stop_at_step=4"]).returncode == 75
    # simulate a crash after step 4 was logged: remove step 4's checkpoint so we resume from step 2
    import shutil

    shutil.rmtree(tmp_path / "ckpt" / "step_4")
    r = run_forked(base)
    assert r.returncode == 0, r.stderr[-3000:]
    acc = EventAccumulator(str(tmp_path / "logs" / "exp_001" / "tensorboard"))
    acc.Reload()
    steps = [e.step for e in acc.Scalars("train/reward_mean")]
    assert steps == sorted(set(steps)) == [1, 2, 3, 4, 5, 6]
    assert [row["step"] for row in read_metrics(tmp_path)] == list(range(7))


def test_killed_mid_checkpoint_leaves_tmp_dir_that_resume_ignores(tmp_path: Path) -> None:
    args = tiny_overrides(tmp_path, fault__kind="kill_in_checkpoint", fault__at_step=4)
    r = run_forked(args)
    assert r.returncode == -signal.SIGKILL
    assert (tmp_path / "ckpt" / "tmp_step_4").is_dir()
    assert (tmp_path / "ckpt" / "step_2" / "training_info.json").is_file()
    assert not (tmp_path / "ckpt" / "step_4").exists()

    r2 = run_forked(args)  # same command: resume detected, so the fault is disarmed
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert "step=2" in r2.stderr.split("resumed", 1)[1].splitlines()[0]
    assert (tmp_path / "ckpt" / "step_4" / "training_info.json").is_file()
    assert not (tmp_path / "ckpt" / "tmp_step_4").exists()


def test_top_k_retention_on_a_real_run(tmp_path: Path) -> None:
    r = run_forked(
        tiny_overrides(
            tmp_path, grpo__max_num_steps=8, checkpointing__save_period=1, checkpointing__keep_top_k=2
        )
    )
    assert r.returncode == 0, r.stderr[-3000:]
    kept = sorted(int(p.name[5:]) for p in (tmp_path / "ckpt").iterdir() if p.name.startswith("step_"))
    assert 8 in kept and 2 <= len(kept) <= 3
    st = read_status(tmp_path)
    assert st["last_checkpoint"].endswith("step_8")
    assert int(Path(st["best_checkpoint"]).name[5:]) in kept
    layout = tmp_path / "ckpt" / "step_8"
    for rel in (
        "training_info.json",
        "config.yaml",
        "policy/weights/model.safetensors",
        "policy/weights/config.json",
        "policy/optimizer/optim.pt",
        "policy/tokenizer/tokenizer.json",
        "train_dataloader.pt",
        "rng/driver.pt",
        "rng/policy_rank0.pt",
        "rng/rollout_rank0.pt",
    ):
        assert (layout / rel).is_file(), rel


def test_sigterm_saves_a_checkpoint_and_exits_75(tmp_path: Path) -> None:
    args = tiny_overrides(tmp_path, grpo__max_num_steps=100000, checkpointing__save_period=100000)
    proc = start_forked(args, tmp_path / "io")
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if read_status(tmp_path)["step"] >= 2:
                    break
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 75, proc.output()[1][-3000:]
    st = read_status(tmp_path)
    assert st["state"] == "stopped" and st["exit_code"] == 75 and st["stop_reason"] == "SIGTERM"
    assert Path(st["last_checkpoint"]).name == f"step_{st['step']}"


def test_finished_run_exits_0_and_writes_the_contract_files(tmp_path: Path) -> None:
    r = run_cli(tiny_overrides(tmp_path))
    assert r.returncode == 0
    st = read_status(tmp_path)
    for key in (
        "state",
        "step",
        "total_steps",
        "phase",
        "phase_done",
        "phase_total",
        "rate",
        "last_checkpoint",
        "best_checkpoint",
        "timestamp",
        "last_progress_at",
        "exp_dir",
        "config_hash",
        "attempt",
    ):
        assert key in st, key
    assert st["state"] == "finished" and st["step"] == st["total_steps"] == 6
    exp = tmp_path / "logs" / "exp_001"
    assert any(p.name.startswith("events.out.tfevents") for p in (exp / "tensorboard").iterdir())
    assert (exp / "config.yaml").is_file() and (exp / "config_hash.txt").read_text().strip() == st[
        "config_hash"
    ]
    rows = read_metrics(tmp_path)
    assert {
        "train/reward_mean",
        "train/loss",
        "timing/train/total_step_time",
        "performance/tokens_per_sec",
    } <= rows[1].keys()
    assert "val/accuracy" in rows[3]
    assert "Collecting rollouts: 100%|" in r.stderr


def test_pace_pads_each_phase_to_its_own_minimum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer import driver
    from trainer.config import load_config

    padded: list[tuple[str, float]] = []  # (the phase status.json shows while it is padded, its minimum)

    def pad(started: float, minimum_s: float) -> float:
        padded.append((str(read_status(tmp_path)["phase"]), minimum_s))
        return 0.0

    monkeypatch.setattr(driver, "pad_phase", pad)
    overrides = tiny_overrides(
        tmp_path,
        grpo__max_num_steps=2,
        grpo__val_period=2,
        grpo__val_at_start=False,
        pace__generation_s=1.5,
        pace__training_s=0.5,
        pace__validation_s=12,
    )
    assert driver.run(load_config(None, overrides)) == 0
    assert padded == [
        ("generating", 1.5),
        ("training", 0.5),
        ("generating", 1.5),
        ("training", 0.5),
        ("validating", 12.0),
    ]


def test_a_bad_override_exits_2_naming_the_key(tmp_path: Path) -> None:
    r = run_cli(tiny_overrides(tmp_path, grpo__max_num_stepz=3))
    assert r.returncode == 2
    assert "grpo.max_num_stepz: unknown key" in r.stderr


def test_cuda_oom_fault_fails_with_the_real_text_and_the_retry_succeeds(tmp_path: Path) -> None:
    args = tiny_overrides(tmp_path, fault__kind="cuda_oom", fault__at_step=3)
    r = run_forked(args, env={"SHEPHERD_ATTEMPT": "1"})
    assert r.returncode == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in r.stderr
    st = read_status(tmp_path)
    assert st["state"] == "failed" and st["error"].startswith("OutOfMemoryError: CUDA out of memory")
    r2 = run_forked(args, env={"SHEPHERD_ATTEMPT": "2"})
    assert r2.returncode == 0, r2.stderr[-3000:]


def test_run_config_fault_prints_nemo_rl_text(tmp_path: Path) -> None:
    r = run_forked(tiny_overrides(tmp_path, fault__kind="run_config_missing", fault__at_step=2))
    assert r.returncode == 1
    assert "FileNotFoundError: Pretrained run config not found at " in r.stderr
    assert (
        "/run_config.yaml on rank=1. This usually means that the one-time HF->mcore conversion on rank=0 "
        "saved to a directory not being mounted on this node."
    ) in r.stderr


def test_nccl_fault_prints_the_watchdog_timeout(tmp_path: Path) -> None:
    r = run_forked(tiny_overrides(tmp_path, fault__kind="nccl_timeout", fault__at_step=2))
    assert r.returncode == 1
    assert "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" in r.stderr
    assert "OpType=ALLREDUCE" in r.stderr and "ran for 600000 milliseconds before timing out." in r.stderr
    assert "torch.distributed.DistBackendError" in r.stderr


def test_signal_fault_kills_the_process(tmp_path: Path) -> None:
    r = run_forked(tiny_overrides(tmp_path, fault__kind="signal", fault__at_step=2, fault__signal="SIGKILL"))
    assert r.returncode == -signal.SIGKILL


def test_hang_fault_stops_progress_but_keeps_the_process_alive(tmp_path: Path) -> None:
    args = tiny_overrides(tmp_path, fault__kind="hang", fault__at_step=2, policy__generation__num_chunks=4)
    proc = start_forked(args, tmp_path / "io")
    try:
        deadline = time.time() + 90
        first = None
        while time.time() < deadline:
            try:
                st = read_status(tmp_path)
                if st["state"] == "generating" and st["step"] == 1 and st["phase_done"] > 0:
                    first = st
                    break
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.2)
        assert first is not None, "never reached the hang"
        time.sleep(2.5)
        later = read_status(tmp_path)
        assert proc.poll() is None  # alive
        assert later["phase_done"] == first["phase_done"] < later["phase_total"]
        assert later["last_progress_at"] == first["last_progress_at"]
        assert later["timestamp"] > first["timestamp"]  # the heartbeat still writes
    finally:
        proc.kill()
        proc.wait(10)


def test_nan_fault_poisons_the_run_from_its_step_without_crashing_it(tmp_path: Path) -> None:
    r = run_forked(tiny_overrides(tmp_path, fault__kind="nan", fault__at_step=3))
    assert r.returncode == 0, r.stderr[-3000:]  # a diverged run keeps running: only its metrics say so
    rows = {row["step"]: row for row in read_metrics(tmp_path) if "train/loss" in row}
    assert all(math.isfinite(rows[s]["train/loss"]) for s in (1, 2))
    assert all(math.isnan(rows[s]["train/loss"]) for s in (3, 4, 5))
    assert all(math.isnan(rows[s]["train/grad_norm"]) for s in (3, 4, 5))
    assert "fault injection" in r.stderr and "NaN" in r.stderr


def test_reward_collapse_fault_zeroes_every_reward_from_its_step(tmp_path: Path) -> None:
    r = run_forked(tiny_overrides(tmp_path, fault__kind="reward_collapse", fault__at_step=3))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {row["step"]: row for row in read_metrics(tmp_path) if "train/reward_mean" in row}
    assert all(rows[s]["train/reward_mean"] == 0.0 for s in (3, 4, 5, 6))
    assert all(rows[s]["train/zero_variance_group_frac"] == 1.0 for s in (3, 4, 5, 6))
    assert rows[1]["train/reward_mean"] > 0


def test_kl_blowup_fault_makes_generation_disagree_with_training(tmp_path: Path) -> None:
    r = run_forked(tiny_overrides(tmp_path, fault__kind="kl_blowup", fault__at_step=2))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {row["step"]: row for row in read_metrics(tmp_path) if "train/token_mult_prob_error" in row}
    assert rows[1]["train/token_mult_prob_error"] < 1.01 and rows[2]["train/token_mult_prob_error"] < 1.01
    # step 2's sync handed the rollout workers perturbed weights: from step 3 on they sample from them
    assert all(rows[s]["train/token_mult_prob_error"] > 1.2 for s in (3, 4, 5, 6))
