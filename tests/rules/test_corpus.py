"""Every real failure-log excerpt of tests/data/failure-logs/ through the production path (watch/lines.py and
the engine, as `shepherd rules test` runs them): each failure is owned by the rule its label names, and no
benign excerpt makes any rule decide anything. A documented miss (`expected_miss` in index.yaml) must stay
a miss, so that fixing it means updating the corpus notes too."""

from __future__ import annotations

import pytest

from supervisor.rules.engine import RuleSet, load_ruleset
from tests.support.corpus import Excerpt, is_hit, load, score, verdict

EXCERPTS = load()
RECALL_GOAL = 0.95


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def _param(ex: Excerpt) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=ex.expected_miss)] if ex.expected_miss else []
    return pytest.param(ex, id=ex.file, marks=marks)


@pytest.mark.parametrize("ex", [_param(ex) for ex in EXCERPTS])
def test_excerpt_is_owned_by_its_labelled_rule(rs: RuleSet, ex: Excerpt) -> None:
    got = verdict(rs, ex)
    expected = "no rule" if not ex.failure else ex.label
    assert is_hit(ex, got), f"{ex.file}: expected {expected}, got {got or 'no rule'} ({ex.source})"


def test_recall_over_failures_meets_the_goal_and_no_benign_excerpt_fires(rs: RuleSet) -> None:
    s = score(rs, EXCERPTS)
    assert s.benign_fired == 0, [ex.file for ex, _ in s.misses if not ex.failure]
    assert s.recall >= RECALL_GOAL, [(ex.file, got) for ex, got in s.misses]


def test_every_excerpt_is_indexed_and_every_index_entry_exists() -> None:
    from tests.support.corpus import CORPUS

    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.log")}
    indexed = [ex.file for ex in EXCERPTS]
    assert len(indexed) == len(set(indexed)), "a file is indexed twice"
    assert set(indexed) == on_disk
    for ex in EXCERPTS:
        assert ex.file.split("/", 1)[0] == ex.label, f"{ex.file} lives outside its label's folder"
        assert ex.source.startswith("https://github.com/"), ex.file
