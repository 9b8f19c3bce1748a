"""Rules files are refused with file:line: field: reason, merged by name, and overridable."""

# ruff: noqa: E501
# (real log lines are long; their shapes matter more than the width)

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.rules.engine import compile_rules, load_ruleset
from supervisor.rules.loader import DEFAULT_RULES_PATH, RulesError, check_files, load_rules_text, merge_rules
from supervisor.rules.model import MissingPlaceholder, parse_duration, render_template

GOOD = """\
version: 1
rules:
  - name: my-oom
    priority: 99
    trigger:
      kind: log
      regex: "CUDA out of memory"
    actions:
      - resume: {from: best, env: {HF_HOME: "{spec.shared_cache_dir}/hf"}, sbatch_args: ["--mem=0"]}
      - alert: {level: error, message: "{run}: {rule}: {excerpt}"}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_default_rules_file_is_valid() -> None:
    assert check_files([DEFAULT_RULES_PATH]) == []


def test_good_file_loads_with_shorthands() -> None:
    doc = load_rules_text(GOOD + "      - cancel\n      - hold: {}\n", "good.yaml")
    (rule,) = doc.rules
    assert [a.kind for a in rule.actions] == ["resume", "alert", "cancel", "hold"]
    assert rule.actions[0].resume is not None and rule.actions[0].resume.from_ == "best"


@pytest.mark.parametrize(
    ("text", "line", "field", "reason"),
    [
        (
            GOOD.replace('regex: "CUDA out of memory"', 'regex: "CUDA (out"'),
            7,
            "rules.0.trigger.regex",
            "invalid regex",
        ),
        (GOOD.replace("priority: 99", "priorty: 99"), 4, "rules.0.priorty", "unknown key"),
        (
            GOOD.replace("from: best", "from: newest"),
            9,
            "rules.0.actions.0.resume.from",
            "should match pattern",
        ),
        (
            GOOD.replace("{spec.shared_cache_dir}", "{spc.dir}"),
            9,
            "rules.0.actions.0.resume.env",
            "unknown placeholder",
        ),
        (GOOD.replace("{excerpt}", "{secret}"), 10, "rules.0.actions.1.alert.message", "unknown placeholder"),
        (
            GOOD.replace("kind: log", "kind: logs"),
            6,
            "rules.0.trigger.kind",
            "does not match any of the expected tags",
        ),
        (GOOD.replace("name: my-oom", "name: My OOM"), 3, "rules.0.name", "lowercase"),
        (GOOD + "  - name: my-oom\n    enabled: false\n", 11, "rules.1.name", "defined twice"),
        (
            "rules:\n  - name: x\n    trigger: {kind: pending, reason: Q, for: soon}\n    actions: [hold]\n",
            3,
            "rules.0.trigger.for",
            "not a duration",
        ),
        ("rules: [\n", 2, "", "invalid YAML"),
    ],
)
def test_bad_file_is_refused_with_line_field_and_reason(
    tmp_path: Path, text: str, line: int, field: str, reason: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    errors = check_files([path])
    assert errors, "a bad file was accepted"
    rendered = [str(e) for e in errors]
    assert any(e.line == line and e.field == field and reason in e.reason for e in errors), rendered
    assert all(r.startswith(f"{path}:") for r in rendered)


def test_unknown_inhibited_rule_is_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path, "inh.yaml", GOOD.replace("    priority: 99\n", "    priority: 99\n    inhibits: [nope]\n")
    )
    (err,) = check_files([path])
    assert err.line == 5 and "nope" in err.reason


def test_later_file_overrides_and_disables_by_name(tmp_path: Path) -> None:
    override = write(
        tmp_path,
        "site.yaml",
        "rules:\n"
        "  - {name: nccl-error, enabled: false}\n"
        "  - name: cuda-oom\n    priority: 5\n    trigger: {kind: log, regex: 'OOM!'}\n    actions: [{alert: {}}]\n",
    )
    rs = load_ruleset([override])
    assert "nccl-error" not in rs.by_name
    assert rs.by_name["cuda-oom"].priority == 5
    assert "host-oom" in rs.by_name
    rs2 = load_ruleset([], disable=["ray-*"])
    assert not any(name.startswith("ray-") for name in rs2.by_name)
    assert "ray-actor-died" in load_ruleset().by_name


def test_load_ruleset_refuses_everything_on_one_bad_file(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", "rules:\n  - name: x\n")
    with pytest.raises(RulesError) as info:
        load_ruleset([bad])
    assert "bad.yaml:2" in str(info.value)


def test_merge_keeps_definition_order_and_compile_sorts_by_priority() -> None:
    a = load_rules_text(
        "rules:\n  - {name: a, priority: 1, trigger: {kind: log, regex: aaa}, actions: [hold]}\n", "a"
    )
    b = load_rules_text(
        "rules:\n  - {name: b, priority: 9, trigger: {kind: log, regex: bbb}, actions: [hold]}\n", "b"
    )
    rules, _ = merge_rules([a, b])
    assert [r.name for r in rules] == ["a", "b"]
    assert [r.name for r in compile_rules(rules).rules] == ["b", "a"]


def test_durations_and_templates() -> None:
    assert parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400 and parse_duration(90) == 90
    with pytest.raises(ValueError):
        parse_duration("thirty")
    assert render_template("{spec.shared_cache_dir}/hf", {"spec.shared_cache_dir": "/shared"}) == "/shared/hf"
    with pytest.raises(MissingPlaceholder):
        render_template("{spec.shared_cache_dir}/hf", {})


def test_non_retryable_rule_cannot_resume() -> None:
    with pytest.raises(RulesError) as info:
        load_rules_text(
            "rules:\n  - {name: a, retryable: false, trigger: {kind: log, regex: aaa}, actions: [resume]}\n",
            "x.yaml",
        )
    assert "non-retryable" in str(info.value)
