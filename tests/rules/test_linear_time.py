"""Rule regexes run in RE2: a hostile pattern or line costs time linear in the text, and what RE2 cannot run
in linear time is refused at load with the file's line and a reason the rule author can act on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import re2  # type: ignore[import-untyped]

from supervisor.domain.jobstate import JobState
from supervisor.rules.engine import MatcherState, compile_rules, load_ruleset, scan_text
from supervisor.rules.loader import RulesError, check_files, load_rules_text
from supervisor.rules.regex import MAX_REGEX_CHARS
from supervisor.rules.stepd import stepd_state

# Each of these took seconds to minutes under Python's backtracking `re`; the timeout is a guard so that a
# regression fails instead of hanging CI, not a speed claim.
pytestmark = pytest.mark.timeout(60)


def rules_text(regex: str, exclude: str | None = None) -> str:
    ex = f"\n      exclude: {json.dumps(exclude)}" if exclude is not None else ""
    return (
        "version: 1\nrules:\n  - name: mine\n    trigger:\n      kind: log\n"
        f"      regex: {json.dumps(regex)}{ex}\n    actions: [cancel]\n"
    )


def test_every_default_rule_regex_is_compiled_by_re2() -> None:
    rs = load_ruleset()
    regexes = [lg.regex for r in rs.rules for lg in r.logs] + [
        lg.exclude for r in rs.rules for lg in r.logs if lg.exclude is not None
    ]
    assert regexes
    assert all(isinstance(rx, re2._Regexp) for rx in regexes)


def test_a_catastrophic_backtracking_pattern_matches_in_linear_time() -> None:
    rs = compile_rules(load_rules_text(rules_text("(a|aa)+b|(x+x+)+y"), "r.yaml").rules)
    st = MatcherState(run_id="r")
    text = "a" * 40 + "\n" + "a" * 60_000 + "\n" + "x" * 60_000 + "\n"
    assert scan_text(rs, st, text, "log") == []
    hit = scan_text(rs, st, "a" * 41 + "b\n", "log", 4)
    assert [m.rule for m in hit] == ["mine"]


def test_the_regex_from_the_report_is_refused_because_it_can_never_match() -> None:
    with pytest.raises(RulesError) as exc:
        load_rules_text(rules_text("(a|aa)+$X"), "team.yaml")
    (err,) = exc.value.errors
    assert (err.file, err.line, err.field) == ("team.yaml", 6, "rules.0.trigger.regex")
    assert "`$` (end of line) is followed by 'X'" in err.reason


@pytest.mark.parametrize(
    ("regex", "reason"),
    [
        ("CUDA(?! warning)", "lookarounds"),
        ("(?<=rank)0", "lookarounds"),
        ("(\\w+) \\1", "backreferences"),
        ("(?P<w>x)(?P=w)", "backreferences"),
        ("(?>a+)b", "atomic groups"),
        ("a*+b", "possessive repeats"),
        ("error\\Z", "RE2 spells the end of text `\\z`"),
        ("(a{1000}){1000}", "RE2"),
    ],
)
def test_constructs_re2_cannot_run_are_refused_with_line_and_reason(regex: str, reason: str) -> None:
    with pytest.raises(RulesError) as exc:
        load_rules_text(rules_text(regex), "r.yaml")
    (err,) = exc.value.errors
    assert err.line == 6 and err.field == "rules.0.trigger.regex"
    assert reason in err.reason


def test_exclude_and_reason_regexes_are_held_to_the_same_engine() -> None:
    with pytest.raises(RulesError) as exc:
        load_rules_text(rules_text("CUDA out of memory", exclude="(?<!no )warn"), "r.yaml")
    assert [e.field for e in exc.value.errors] == ["rules.0.trigger.exclude"]
    text = rules_text("x").replace(
        'kind: log\n      regex: "x"', 'kind: pending\n      reason: "(a)\\\\1"\n      for: 5m'
    )
    with pytest.raises(RulesError) as exc2:
        load_rules_text(text, "r.yaml")
    assert "backreferences" in exc2.value.errors[0].reason


@pytest.mark.parametrize(
    ("regex", "reason"),
    [
        ("\n?", "matches the empty string"),  # found by bench/fuzz.py: a hit at every byte of every chunk
        ("x*", "matches the empty string"),
        ("(x+x+)+y$" * 400, "too complex to match quickly"),  # found by bench/fuzz.py: 0.6 s per 8 KiB
    ],
)
def test_a_log_regex_that_would_fire_everywhere_or_crawl_is_refused(regex: str, reason: str) -> None:
    with pytest.raises(RulesError) as exc:
        load_rules_text(rules_text(regex), "r.yaml")
    assert reason in exc.value.errors[0].reason


def test_an_overlong_regex_is_refused() -> None:
    with pytest.raises(RulesError) as exc:
        load_rules_text(rules_text("a" * (MAX_REGEX_CHARS + 1)), "r.yaml")
    assert "limit is" in exc.value.errors[0].reason


def test_rules_check_reports_every_refused_regex_with_its_line(tmp_path: Path) -> None:
    p = tmp_path / "team.yaml"
    p.write_text(rules_text("ok|(a)\\1", exclude="(?=x)"))
    errors = check_files([p])
    assert [(e.line, e.field) for e in errors] == [
        (6, "rules.0.trigger.regex"),
        (7, "rules.0.trigger.exclude"),
    ]


def test_stacked_bracket_prefixes_before_a_traceback_do_not_backtrack() -> None:
    # `[rank1]:` x 30 then garbage took minutes in the traceback-prefix regex under Python's re
    rs = load_ruleset()
    st = MatcherState(run_id="r")
    line = "[rank1]:" * 30 + "!Traceback (most recent call last):\n"
    scan_text(rs, st, line * 3, "log")
    assert st.tracebacks  # the line still opened a traceback


def test_a_slurmstepd_line_padded_with_spaces_is_read_in_linear_time() -> None:
    line = "*** JOB 7 ON node1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT" + " " * 60_000
    assert stepd_state(line + "!") is None
    assert stepd_state(line + " ***") == (JobState.TIMEOUT, "node1")


def test_a_long_line_full_of_excluded_matches_is_skipped_once() -> None:
    rs = compile_rules(
        load_rules_text(rules_text("CUDA out of memory", exclude="(?i)warning"), "r.yaml").rules
    )
    st = MatcherState(run_id="r")
    noisy = "CUDA out of memory warning " * 2400  # 2,400 matches, each vetoed by the same line
    assert scan_text(rs, st, noisy + "\n", "log") == []
    assert [m.rule for m in scan_text(rs, st, "CUDA out of memory\n", "log", 2)] == ["mine"]


def test_a_regex_over_its_cpu_budget_is_quarantined_and_the_other_rules_go_on() -> None:
    import random

    text = rules_text("a[ab]{200}x") + (
        "  - name: oom\n    trigger:\n      kind: log\n      regex: CUDA out of memory\n"
        "    actions: [cancel]\n"
    )
    rs = compile_rules(load_rules_text(text, "r.yaml").rules)
    rng = random.Random(7)
    slow_line = "".join(rng.choice("ab") for _ in range(256 * 1024))  # ~1 s of RE2 DFA-cache misses
    st = MatcherState(run_id="r")
    assert scan_text(rs, st, slow_line + "\n", "log") == []
    assert "mine" in rs.quarantined and "CPU" in rs.quarantined["mine"]
    got = scan_text(rs, st, slow_line + "x\nCUDA out of memory\n", "log", 2)
    assert [m.rule for m in got] == ["oom"]  # the quarantined rule is not run again; the others are


def test_evidence_lines_are_clipped_so_a_notice_stays_small() -> None:
    rs = load_ruleset()
    st = MatcherState(run_id="r")
    line = "torch.OutOfMemoryError: CUDA out of memory " + "x" * 60_000
    [m] = scan_text(rs, st, line + "\n", "ray-driver.log")
    assert m.rule == "cuda-oom"
    (kept,) = m.evidence.lines
    assert len(kept) < 2100 and kept.endswith(f"…[{len(line)} chars]")
