"""Checkpoint discovery and ranking over NeMo RL's layout, with fallback when the chosen one vanished."""

from __future__ import annotations

import json
from pathlib import Path

from supervisor.decide.checkpoints import (
    Checkpoint,
    candidates,
    choose,
    choose_in_dir,
    discover,
    list_checkpoint_dir,
    metric_value,
    top_k,
)

LISTING = [
    ("step_10", {"step": 10, "val:accuracy": 0.40}, True),
    ("step_20", {"step": 20, "val:accuracy": 0.62}, True),
    ("step_30", {"step": 30, "val:accuracy": 0.55}, True),
    ("step_40", {"step": 40, "val:accuracy": 0.48}, True),
    ("step_50", None, False),  # interrupted mid-save: no training_info.json
    ("tmp_step_60", {"step": 60, "val:accuracy": 0.99}, True),  # a save in progress
    ("logs", None, False),
]


def test_discover_ignores_tmp_and_incomplete_and_sorts_newest_first() -> None:
    cps = discover(LISTING, "val:accuracy")
    assert [c.name for c in cps] == ["step_40", "step_30", "step_20", "step_10"]
    assert cps[0].metric == 0.48


def test_metric_lookup_handles_nemo_rl_and_nested_shapes() -> None:
    assert metric_value({"val:accuracy": 0.5}, "val:accuracy") == 0.5
    assert metric_value({"val": {"accuracy": 0.6}}, "val:accuracy") == 0.6
    assert metric_value({"train_reward_mean": 0.7}, "train:reward_mean") == 0.7
    assert metric_value({"loss": 1.5}, "loss") == 1.5
    # our trainer's training_info.json nests what it logged, under the logged names
    assert metric_value({"metrics": {"val/accuracy": 0.8, "val/reward_mean": 0.9}}, "val:accuracy") == 0.8
    assert metric_value({"val:accuracy": "n/a"}, "val:accuracy") is None
    assert metric_value({"val:accuracy": float("nan")}, "val:accuracy") is None


def test_best_and_latest_among_top_k() -> None:
    cps = discover(LISTING, "val:accuracy")
    assert choose(cps, "best").checkpoint == Checkpoint("step_20", 20, 0.62)
    # top-2 by accuracy are step_20 and step_30; the latest (step_40) is kept too, as NeMo RL never deletes it
    assert {c.name for c in top_k(cps, 2)} == {"step_20", "step_30", "step_40"}
    assert choose(cps, "latest", keep_top_k=2).checkpoint.name == "step_40"  # type: ignore[union-attr]
    # lower is better flips the ranking
    assert choose(cps, "best", higher_is_better=False).checkpoint.name == "step_10"  # type: ignore[union-attr]


def test_ties_go_to_the_newer_step_and_missing_metrics_rank_last() -> None:
    cps = [Checkpoint("step_1", 1, 0.5), Checkpoint("step_2", 2, 0.5), Checkpoint("step_3", 3, None)]
    assert [c.name for c in candidates(cps, "best")] == ["step_2", "step_1", "step_3"]


def test_explicit_step_and_its_fallback() -> None:
    cps = discover(LISTING, "val:accuracy")
    assert choose(cps, "step_30").checkpoint.name == "step_30"  # type: ignore[union-attr]
    ch = choose(cps, "step_35")
    assert ch.checkpoint is not None and ch.checkpoint.name == "step_40"
    assert "step_35 not found" in ch.reason


def test_vanished_checkpoint_falls_back_to_the_next_and_says_so() -> None:
    cps = discover(LISTING, "val:accuracy")
    ch = choose(cps, "best", exists=lambda name: name != "step_20")
    assert ch.checkpoint is not None and ch.checkpoint.name == "step_30"
    assert ch.skipped == ("step_20",)
    assert "step_20 vanished" in ch.reason and "step_30" in ch.reason
    gone = choose(cps, "latest", exists=lambda name: False)
    assert gone.checkpoint is None and "starting from scratch" in gone.reason
    assert choose([], "latest").reason.startswith("no complete checkpoint")


def test_real_directory_listing(tmp_path: Path) -> None:
    for step, acc in [(10, 0.3), (20, 0.8)]:
        d = tmp_path / f"step_{step}"
        d.mkdir()
        (d / "training_info.json").write_text(json.dumps({"step": step, "val:accuracy": acc}))
    (tmp_path / "tmp_step_30").mkdir()
    (tmp_path / "step_40").mkdir()  # incomplete
    (tmp_path / "step_50").mkdir()
    (tmp_path / "step_50" / "training_info.json").write_text("{broken")
    listing = list_checkpoint_dir(tmp_path)
    assert ("step_40", None, False) in listing
    choice, path = choose_in_dir(tmp_path, "best", metric="val:accuracy")
    assert choice.checkpoint is not None and path == tmp_path / "step_20"
    latest, _ = choose_in_dir(tmp_path, "latest")
    assert latest.checkpoint is not None and latest.checkpoint.name == "step_20"
    assert list_checkpoint_dir(tmp_path / "nope") == []


def test_a_rollback_ranks_only_the_checkpoints_saved_before_the_divergence() -> None:
    cps = [Checkpoint("step_2", 2, 0.5), Checkpoint("step_4", 4, 0.7), Checkpoint("step_6", 6, 0.9)]
    best = choose(cps, "best", before_step=6)
    assert best.checkpoint is not None and best.checkpoint.name == "step_4"
    assert "best before step 6" in best.reason
    latest = choose(cps, "latest", before_step=5)
    assert latest.checkpoint is not None and latest.checkpoint.name == "step_4"
    none = choose(cps, "best", before_step=2)
    assert none.checkpoint is None and none.reason == "no complete checkpoint before step 2"


def test_a_hostile_training_info_makes_its_checkpoint_incomplete_not_a_crash(tmp_path: Path) -> None:
    import os

    for name, content in [
        ("step_1", b"[" * 100_000 + b"]" * 100_000),  # nested past the decoder's recursion
        ("step_2", b'{"a": ' + b"1" * 10_000 + b"}"),  # an int too long to convert
        ("step_3", b'{"pad": "' + b"x" * (2 << 20) + b'"}'),  # over the size bound
        ("step_5", b'{"val:accuracy": 0.5}'),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "training_info.json").write_bytes(content)
    (tmp_path / "step_4").mkdir()
    os.mkfifo(tmp_path / "step_4" / "training_info.json")  # would block a plain open()
    listing = list_checkpoint_dir(tmp_path)
    assert [(name, complete) for name, _info, complete in listing] == [
        ("step_1", False),
        ("step_2", False),
        ("step_3", False),
        ("step_4", False),
        ("step_5", True),
    ]
