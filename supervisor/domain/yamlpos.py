"""YAML loading that remembers where every value came from, and that a tiny hostile file cannot blow up.

Pydantic tells us *which* field is wrong (a path like ``slurm.nodes``); users
need *where* it is in their file. We compose the YAML node tree once and map
every key path to its line so each validation error can name both.

A spec or rules file comes from whoever can write the queue or a rules folder, so parsing is bounded:
500 bytes of nested aliases ("billion laughs") expand to billions of nodes for anything that walks the
data (the line map, pydantic), and a deeply nested flow sequence overflows PyYAML's recursive composer.
The composed node graph is measured before anything walks it: nesting depth, node count with every
alias expanded, and alias cycles are refused with the line where the bound was crossed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

MAX_YAML_DEPTH = 50  # nesting levels; real specs and rules files use fewer than 10
MAX_YAML_NODES = 50_000  # nodes with every alias expanded; the default rules file has about 600
_CONSTRUCT_ERRORS = (
    ValueError,
    OverflowError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    RecursionError,
)


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


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing to compose a document nested deeper than `MAX_YAML_DEPTH`.

    PyYAML has no such option; its composer recurses once per level, so without this a few kilobytes of
    ``[[[[...`` raise RecursionError instead of a located error.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.MarkedYAMLError(
                    problem=f"nested deeper than {MAX_YAML_DEPTH} levels", problem_mark=mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_nesting(text: str) -> None:
    """Refuse nesting deeper than `MAX_YAML_DEPTH` before PyYAML's Python scanner sees the text.

    That scanner keeps one "possible simple key" per open flow collection and re-checks all of them for every
    token it scans ahead, so a line of a thousand `[` cost seconds before the composer's own depth check
    could stop it. LibYAML's C parser (bundled with PyYAML's wheels) streams the events in microseconds;
    without it the composer's check still holds, only slower.
    """
    if not yaml.__with_libyaml__:
        return
    depth = 0
    events = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            events += 1
            if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise yaml.MarkedYAMLError(
                        problem=f"nested deeper than {MAX_YAML_DEPTH} levels", problem_mark=_mark(event)
                    )
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
            if events > 4 * MAX_YAML_NODES:
                raise yaml.MarkedYAMLError(
                    problem=f"more than {MAX_YAML_NODES} values", problem_mark=_mark(event)
                )
    except yaml.MarkedYAMLError as exc:
        if not _is_libyaml_nesting_refusal(exc):
            raise
        # LibYAML's scanner reads a flow line ahead of its events, and since the LibYAML that PyYAML 6.0.4
        # bundles it refuses past its own bound (1000 levels) first: the same refusal, said our way, so the
        # message does not depend on which PyYAML build a machine installed.
        mark = exc.problem_mark
        raise yaml.MarkedYAMLError(
            problem=f"nested deeper than {MAX_YAML_DEPTH} levels",
            problem_mark=yaml.Mark("", 0, mark.line, mark.column, None, 0) if mark is not None else None,
        ) from exc


def _is_libyaml_nesting_refusal(exc: yaml.MarkedYAMLError) -> bool:
    """LibYAML's own depth bound (`yaml_set_max_nest_level`), whose depth is always far beyond ours."""
    return "maximum nesting depth" in (exc.problem or "")


def _mark(event: yaml.Event) -> yaml.Mark:
    """A pure-Python mark (line and column) for an event from LibYAML's parser."""
    m = event.start_mark
    return yaml.Mark("", 0, m.line if m else 0, m.column if m else 0, None, 0)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node) -> tuple[int, str] | None:
    """(line, why) when the document is too big once its aliases are expanded, or cyclic; else None.

    Sizes and depths are memoised per node, so this is linear in the composed graph however many times
    an anchor is referenced: it measures a billion laughs without expanding it.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(key)
            if size[key] > MAX_YAML_NODES:
                line = node.start_mark.line + 1
                return (
                    line,
                    f"more than {MAX_YAML_NODES} values once its aliases are expanded (an alias bomb?)",
                )
            if depth[key] > MAX_YAML_DEPTH:
                return node.start_mark.line + 1, f"aliases nest deeper than {MAX_YAML_DEPTH} levels"
            continue
        if key in size:
            continue
        if key in on_path:
            return node.start_mark.line + 1, "an alias refers to a node that contains it (a cycle)"
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)
    return None


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
    """Parse one bounded YAML document; syntax errors and bounds become a located `YamlDocumentError`."""
    loader: _BoundedLoader | None = None
    try:
        _check_nesting(text)
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is not None:
            problem = _check_expansion(node)
            if problem is not None:
                raise YamlDocumentError([FieldError(file, problem[0], "", f"refused: {problem[1]}")])
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlDocumentError([FieldError(file, line, "", f"invalid YAML: {exc.problem or exc}")]) from exc
    except yaml.YAMLError as exc:
        raise YamlDocumentError([FieldError(file, None, "", f"invalid YAML: {exc}")]) from exc
    except _CONSTRUCT_ERRORS as exc:
        # a scalar PyYAML's constructors cannot build raises their own error types: an int of 5,000 digits
        # (ValueError), `!!timestamp 99999-01-01` (AttributeError), `!!binary` of bad base64 (TypeError)
        raise YamlDocumentError([FieldError(file, None, "", f"invalid YAML value: {exc}")]) from exc
    finally:
        if loader is not None:
            loader.dispose()
    lines: dict[tuple[str | int, ...], int] = {}
    if node is not None:
        _line_map(node, (), lines)
    return data, lines


def validate_located(
    model: type[M],
    data: Any,
    lines: dict[tuple[str | int, ...], int],
    file: str,
    context: dict[str, Any] | None = None,
) -> M:
    """Validate `data` as `model` (`context`: pydantic's validation context), turning pydantic's errors into
    located ones."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            loc = [p for p in err["loc"] if isinstance(p, str | int)]
            field = ".".join(str(p) for p in loc)
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key (not allowed here)" + near_miss(model, loc)
            errors.append(FieldError(file, _nearest_line(lines, loc), field, msg))
        raise YamlDocumentError(errors) from exc


def near_miss(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """`; did you mean `max_attempts`?` for an unknown key at `loc` close to a field of the model that holds
    it ("" when none is close, or `loc` leaves the models: a list item, a free-form table)."""
    parent = _model_at(model, loc[:-1])
    if parent is None or not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], list(parent.model_fields), n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


def _model_at(model: type[BaseModel], path: Sequence[str | int]) -> type[BaseModel] | None:
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = _submodel(field.annotation) if field is not None else None
        if inner is None:
            return None
        model = inner
    return model


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (`SlurmSpec`, `ContainerSpec | None`), or None for a scalar, list or table."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def load_yaml_model(
    model: type[M], path: Path, text: str | None = None, *, context: dict[str, Any] | None = None
) -> M:
    """Read, parse and validate a YAML file into `model` with located errors."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise YamlDocumentError([FieldError(str(path), None, "", f"not UTF-8 text: {exc}")]) from exc
    data, lines = parse_yaml(text, str(path))
    return validate_located(model, data, lines, str(path), context)
