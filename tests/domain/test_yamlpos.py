"""Spec and rules YAML is bounded: alias bombs, deep nesting, alias cycles and unbuildable scalars are
refused with a located reason, quickly, while anchors used the ordinary way still work."""

from __future__ import annotations

import pytest

from supervisor.domain.yamlpos import MAX_YAML_DEPTH, YamlDocumentError, parse_yaml

pytestmark = pytest.mark.timeout(60)  # a regression must fail, not eat CI's memory or time


def billion_laughs(levels: int = 8) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghijk"[: levels - 1]:
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
        prev = name
    lines.append(f"command: *{prev}")
    return "\n".join(lines) + "\n"


def refusal(text: str) -> tuple[int | None, str]:
    with pytest.raises(YamlDocumentError) as exc:
        parse_yaml(text, "spec.yaml")
    (err,) = exc.value.errors
    assert err.file == "spec.yaml"
    return err.line, err.reason


def test_a_billion_laughs_is_refused_without_being_expanded() -> None:
    text = billion_laughs()
    assert len(text) < 600
    line, reason = refusal(text)
    assert line is not None and "once its aliases are expanded" in reason


def test_deep_nesting_is_refused_at_its_line() -> None:
    line, reason = refusal("name: x\ncommand: " + "[" * 5000 + "]" * 5000 + "\n")
    assert line == 2 and f"nested deeper than {MAX_YAML_DEPTH} levels" in reason


@pytest.mark.parametrize("levels", [MAX_YAML_DEPTH + 1, 1001, 5000])
def test_the_refusal_is_shepherds_whichever_yaml_layer_refuses_first(levels: int) -> None:
    # past 1000 levels the LibYAML bundled with PyYAML >= 6.0.3 stops the scan with its own message first
    for text in ("[" * levels + "]" * levels, "".join(f"{'  ' * i}k{i}:\n" for i in range(levels)) + "  x\n"):
        line, reason = refusal(f"name: x\ncommand: {text}" if text.startswith("[") else text)
        assert reason == f"invalid YAML: nested deeper than {MAX_YAML_DEPTH} levels"
        assert line is not None and line <= MAX_YAML_DEPTH + 2


def test_aliases_that_nest_deeper_than_the_bound_are_refused() -> None:
    lines = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 60)]
    _line, reason = refusal("\n".join(lines) + "\n")
    assert "aliases nest deeper" in reason


def test_an_alias_cycle_is_refused() -> None:
    _line, reason = refusal("name: c\ncommand: &x [a, *x]\n")
    assert "cycle" in reason


@pytest.mark.parametrize("value", ["9" * 5000, "!!timestamp 99999-01-01"])
def test_a_scalar_yaml_cannot_build_is_a_located_error_not_a_crash(value: str) -> None:
    _line, reason = refusal(f"name: c\nnodes: {value}\n")
    assert reason.startswith("invalid YAML")


def test_anchors_and_merge_keys_used_normally_still_load() -> None:
    data, lines = parse_yaml(
        "base: &b {mem: 16G, time: '1:00:00'}\nslurm:\n  <<: *b\n  nodes: 2\nargs: &a [x, y]\nmore: *a\n",
        "spec.yaml",
    )
    assert data["slurm"] == {"mem": "16G", "time": "1:00:00", "nodes": 2}
    assert data["more"] == ["x", "y"]
    assert lines[("slurm", "nodes")] == 4


def test_a_control_character_is_a_located_error() -> None:
    # found by bench/fuzz.py: PyYAML's reader raised ReaderError from the loader's constructor, uncaught
    _line, reason = refusal("\x8dn")
    assert "invalid YAML" in reason and "unacceptable character" in reason
