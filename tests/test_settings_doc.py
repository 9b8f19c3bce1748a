"""docs/operation.md's example shepherd.toml and the settings model agree: the example validates (with its
commented-out keys and without them), every key of the model is in it, the value each key gives is the value
the daemon then holds, and the variable named beside each key is the one that sets it."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from supervisor.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "operation.md"
NOT_IN_THE_FILE = {("root",), ("config_file",)}  # they say where the file is: `--root`, SHEPHERD_CONFIG_FILE
COMMENTED_KEY = re.compile(r"^# (?=[a-z_]+ = )", re.MULTILINE)


@pytest.fixture(autouse=True)
def no_shepherd_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("SHEPHERD_"):
            monkeypatch.delenv(name)


def example() -> str:
    blocks = re.findall(r"```toml\n(# <root>/shepherd\.toml\n.*?)```", DOC.read_text(), re.DOTALL)
    assert len(blocks) == 1, "docs/operation.md must hold one full example, opening `# <root>/shepherd.toml`"
    return str(blocks[0])


def with_commented_keys(text: str) -> str:
    return COMMENTED_KEY.sub("", text)


def leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Key path -> value; a table that is a model's section is walked into, any other is one value."""
    out: dict[tuple[str, ...], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and (*prefix, key) not in {("slack", "team_channels")}:
            out.update(leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def model_fields(model: type[BaseModel] = Settings, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for name, field in model.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            out |= model_fields(section, (*prefix, name))
        else:
            out.add((*prefix, name))
    return out


def held(settings: Settings, path: tuple[str, ...]) -> Any:
    value: Any = settings
    for part in path:
        value = getattr(value, part)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [str(v) if isinstance(v, Path) else v for v in value]
    return value


@pytest.mark.parametrize("commented", [False, True], ids=["as-written", "commented-keys-too"])
def test_the_example_validates_and_every_value_is_the_one_held(tmp_path: Path, commented: bool) -> None:
    text = with_commented_keys(example()) if commented else example()
    (tmp_path / "shepherd.toml").write_text(text)
    settings = load_settings(tmp_path)
    for path, value in leaves(tomllib.loads(text)).items():
        assert held(settings, path) == value, ".".join(path)


def test_every_key_of_the_model_is_in_the_example() -> None:
    documented = set(leaves(tomllib.loads(with_commented_keys(example()))))
    missing = model_fields() - NOT_IN_THE_FILE - documented
    assert not missing, f"add to docs/operation.md's shepherd.toml: {sorted('.'.join(p) for p in missing)}"


def documented_variables() -> dict[tuple[str, ...], str]:
    """Key path -> the variable its line's comment names."""
    section: tuple[str, ...] = ()
    out: dict[tuple[str, ...], str] = {}
    for line in with_commented_keys(example()).splitlines():
        if m := re.match(r"\[([a-z_.]+)\]", line):
            section = tuple(m.group(1).split("."))
        elif m := re.match(r"([a-z_]+) = .*#\s*(\S+?):", line):
            out[(*section, m.group(1))] = m.group(2)
    return out


def test_each_key_names_its_variable_and_that_variable_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = documented_variables()
    values = leaves(tomllib.loads(with_commented_keys(example())))
    assert set(variables) == set(values), "every key line of the example names its SHEPHERD_* variable"
    for path, name in variables.items():
        assert name == "SHEPHERD_" + "__".join(path).upper()
        value = values[path]
        if isinstance(value, list | dict):
            monkeypatch.setenv(name, json.dumps(value))
        else:
            monkeypatch.setenv(name, str(value).lower() if isinstance(value, bool) else str(value))
    settings = load_settings(tmp_path)  # no file: the variables alone
    for path, value in values.items():
        assert held(settings, path) == value, variables[path]
