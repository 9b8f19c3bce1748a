"""The real failure-log corpus (tests/data/failure-logs/) read once, replayed through the production path and
scored, so the corpus test and the recall benchmark count hits and misses the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from supervisor.rules.engine import RuleSet
from supervisor.rules.replay import owner, replay

CORPUS = Path(__file__).resolve().parents[1] / "data" / "failure-logs"
# Scored once by bench/rules_recall.py --held-out, never read to write a pattern (its README says why).
# Sets 1 (failure-logs-heldout/, f1c9663), 2 (failure-logs-heldout-2/, 8d440a2), 3
# (failure-logs-heldout-3/, 63fefcc), 4 (failure-logs-heldout-4/, 249835c), 5 (failure-logs-heldout-5/,
# 17188b4), 6 (failure-logs-heldout-6/, 287ebd8) and 7 (failure-logs-heldout-7/, 6b8ed61) were each scored
# once and then moved into the corpus (its README: "Third" to "Ninth round").
HELD_OUT = Path(__file__).resolve().parents[1] / "data" / "failure-logs-heldout-8"
# A class two rules serve: the label names the class, either rule owning the incident names it right.
# disk-almost-full is Ray's warning of a disk past its threshold (an alert, nothing changed); disk-full acts.
# logger-degraded is W&B's server failing while wandb retries (an alert only); logger-failure acts.
SAME_CLASS = {
    "container-import-transient": "container-import-failed",
    "disk-almost-full": "disk-full",
    "logger-degraded": "logger-failure",
    "ray-dashboard-failed": "ray-startup-failed",
}
BENIGN = "benign"


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One index.yaml entry: the file, where it was pasted, and the rule that should own it (or benign)."""

    file: str
    source: str
    label: str
    retryable: bool
    note: str
    expected_miss: str | None = None  # why the rules cannot tell from the text alone (documented misses)
    root: Path = CORPUS

    @property
    def path(self) -> Path:
        return self.root / self.file

    @property
    def failure(self) -> bool:
        return self.label != BENIGN


def load(root: Path = CORPUS) -> list[Excerpt]:
    entries = yaml.safe_load((root / "index.yaml").read_text(encoding="utf-8"))
    return [
        Excerpt(
            file=e["file"],
            source=e["source"],
            label=e["label"],
            retryable=bool(e["retryable"]),
            note=str(e.get("note") or ""),
            expected_miss=e.get("expected_miss"),
            root=root,
        )
        for e in entries
    ]


def verdict(rs: RuleSet, ex: Excerpt) -> str | None:
    """The rule that owns the excerpt's incident after a replay through watch/lines.py and the engine."""
    return owner(replay(rs, ex.path))


def is_hit(ex: Excerpt, got: str | None) -> bool:
    """A failure counts when its own rule owns the incident; a benign excerpt when no rule decided at all."""
    return got is None if not ex.failure else SAME_CLASS.get(got or "", got) == ex.label


@dataclass(frozen=True, slots=True)
class Score:
    per_class: dict[str, tuple[int, int]]  # label -> (hits, total), benign included
    misses: list[tuple[Excerpt, str | None]]

    @property
    def failures(self) -> tuple[int, int]:
        hits = sum(h for label, (h, _) in self.per_class.items() if label != BENIGN)
        total = sum(t for label, (_, t) in self.per_class.items() if label != BENIGN)
        return hits, total

    @property
    def recall(self) -> float:
        hits, total = self.failures
        return hits / total if total else 0.0

    @property
    def benign_fired(self) -> int:
        hits, total = self.per_class.get(BENIGN, (0, 0))
        return total - hits


def score(rs: RuleSet, excerpts: Iterable[Excerpt]) -> Score:
    per_class: dict[str, tuple[int, int]] = {}
    misses = []
    for ex in excerpts:
        got = verdict(rs, ex)
        hit = is_hit(ex, got)
        h, t = per_class.get(ex.label, (0, 0))
        per_class[ex.label] = (h + int(hit), t + 1)
        if not hit:
            misses.append((ex, got))
    return Score(dict(sorted(per_class.items())), misses)
