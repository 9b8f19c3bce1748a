"""YAML loading that remembers where every value came from.

Pydantic tells us *which* field is wrong (a path like ``slurm.nodes``); users
need *where* it is in their file. We compose the YAML node tree once and map
every key path to its line so each validation error can name both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem in a YAML document, located for a human."""

    file: str
    line: int | None
    field: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field or '<document>'}: {self.reason}"


class YamlDocumentError(Exception):
    """A document that could not be turned into the wanted model; carries every located error."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def _line_map(node: yaml.Node, path: tuple[str | int, ...], out: dict[tuple[str | int, ...], int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            out[(*path, key)] = key_node.start_mark.line + 1
            _line_map(value_node, (*path, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, (*path, i), out)


def _nearest_line(lines: dict[tuple[str | int, ...], int], loc: Iterable[str | int]) -> int | None:
    path = tuple(loc)
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]


def parse_yaml(text: str, file: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """Parse one YAML document; syntax errors become a located `YamlDocumentError`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlDocumentError([FieldError(file, line, "", f"invalid YAML: {exc.problem or exc}")]) from exc
    except yaml.YAMLError as exc:
        raise YamlDocumentError([FieldError(file, None, "", f"invalid YAML: {exc}")]) from exc
    lines: dict[tuple[str | int, ...], int] = {}
    if node is not None:
        _line_map(node, (), lines)
    return data, lines


def validate_located(model: type[M], data: Any, lines: dict[tuple[str | int, ...], int], file: str) -> M:
    """Validate `data` as `model`, turning pydantic's errors into located ones."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            loc = [p for p in err["loc"] if isinstance(p, str | int)]
            field = ".".join(str(p) for p in loc)
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key (not allowed here)"
            errors.append(FieldError(file, _nearest_line(lines, loc), field, msg))
        raise YamlDocumentError(errors) from exc


def load_yaml_model(model: type[M], path: Path, text: str | None = None) -> M:
    """Read, parse and validate a YAML file into `model` with located errors."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise YamlDocumentError([FieldError(str(path), None, "", f"not UTF-8 text: {exc}")]) from exc
    data, lines = parse_yaml(text, str(path))
    return validate_located(model, data, lines, str(path))
