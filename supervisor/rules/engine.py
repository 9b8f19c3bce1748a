"""The rules engine's public face: compile rules once (`compiled.py`), keep one state per attempt
(`state.py`), feed it observations and log text (`matcher.py`); callers import from here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from supervisor.domain.spec import JobSpec
from supervisor.rules.compiled import (
    CompiledLog,
    CompiledRule,
    RuleSet,
    compile_rules,
    load_ruleset,
    plan_gates,
)
from supervisor.rules.matcher import (
    TRACEBACK_IDLE_S,
    candidate_positions,
    evaluate,
    feed,
    feed_lines,
    flush,
    note_files,
    scan_lines,
    scan_text,
)
from supervisor.rules.state import Evidence, Match, MatcherState, find_node, normalise_signature
from supervisor.rules.stepd import stepd_state


def spec_ruleset(spec: JobSpec, extra: Sequence[Path] = ()) -> RuleSet:
    """The rules a run of this spec is watched with: the defaults (unless `rules.use_default: false`), the
    spec's `rules.files`, then `extra` files (`shepherd rules test --rules`), minus `rules.disable`."""
    return load_ruleset(
        [*spec.rules.files, *extra], use_default=spec.rules.use_default, disable=spec.rules.disable
    )


__all__ = [
    "TRACEBACK_IDLE_S",
    "CompiledLog",
    "CompiledRule",
    "Evidence",
    "Match",
    "MatcherState",
    "RuleSet",
    "candidate_positions",
    "compile_rules",
    "evaluate",
    "feed",
    "feed_lines",
    "find_node",
    "flush",
    "load_ruleset",
    "normalise_signature",
    "note_files",
    "plan_gates",
    "scan_lines",
    "scan_text",
    "spec_ruleset",
    "stepd_state",
]
