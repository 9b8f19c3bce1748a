"""Loading rules files with located errors, and merging several into one rule set.

A rules file is refused as a whole (``file:line: field.path: reason`` for each
problem) so that at hot-reload the daemon can keep the old rules in force
instead of running with half a rule set.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from supervisor.domain.spec import JobSpec
from supervisor.domain.yamlpos import FieldError, YamlDocumentError, parse_yaml
from supervisor.rules.model import Rule, RulesFile

RuleError = FieldError

MAX_RULES_BYTES = 1024 * 1024  # the default rules file is ~20 KB
# The shipped rules are package data (pyproject's package-data), so a wheel that pipx or uv installed has
# them too; read where the package lies (wheels install unpacked): errors and `rules check` name a real file.
DEFAULT_RULES_DIR = Path(str(resources.files("supervisor.rules") / "defaults"))
DEFAULT_RULES_PATH = DEFAULT_RULES_DIR / "default.yaml"


class RulesError(YamlDocumentError):
    """One or more rules files were refused; `errors` holds each located problem."""


def _cross_checks(doc: RulesFile, lines: dict[tuple[str | int, ...], int], file: str) -> list[RuleError]:
    """Checks pydantic cannot do per field: duplicate names within a file."""
    errors: list[RuleError] = []
    seen: set[str] = set()
    for i, rule in enumerate(doc.rules):
        if rule.name in seen:
            line = lines.get(("rules", i, "name")) or lines.get(("rules", i))
            errors.append(RuleError(file, line, f"rules.{i}.name", f"rule {rule.name!r} is defined twice"))
        seen.add(rule.name)
    return errors


def _user_path(loc: Sequence[Any], data: Any) -> tuple[str | int, ...]:
    """Pydantic's error path without the union tags it inserts: the path as written in the file."""
    out: list[str | int] = []
    cur = data
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and isinstance(part, str) and part not in _TAGS:
            out.append(part)  # a required key the user left out: say where it belongs
            cur = None
    return tuple(out)


_TAGS = frozenset({"log", "state", "pending", "stalled", "missing", "metric"})  # union tags pydantic adds
_ALIASES = {"from_": "from", "for_s": "for", "after_s": "after", "min_running_s": "min_running"}


def _validate(data: Any, lines: dict[tuple[str | int, ...], int], file: str) -> RulesFile:
    try:
        return RulesFile.model_validate(data)
    except ValidationError as exc:
        errors: list[RuleError] = []
        for err in exc.errors():
            loc = [_ALIASES.get(p, p) if isinstance(p, str) else p for p in err["loc"]]
            path = _user_path(loc, data)
            if err["type"] == "union_tag_invalid":
                path = (*path, "kind")
            line = None
            probe = path
            while line is None:
                line = lines.get(probe)
                if not probe:
                    break
                probe = probe[:-1]
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key (not allowed here)"
            errors.append(RuleError(file, line, ".".join(str(p) for p in path), msg))
        raise RulesError(errors) from exc


def load_rules_text(text: str, file: str) -> RulesFile:
    """Parse and validate one rules document; raises `RulesError` with every located problem."""
    try:
        data, lines = parse_yaml(text, file)
        if data is None:
            data = {}
        doc = _validate(data, lines, file)
    except YamlDocumentError as exc:
        raise RulesError(exc.errors) from exc
    errors = _cross_checks(doc, lines, file)
    if errors:
        raise RulesError(errors)
    return doc


def read_rules_text(path: Path) -> str:
    """A rules file's text, bounded: a regular file (a FIFO would block the reader) of at most
    `MAX_RULES_BYTES`, in UTF-8; raises `RulesError` saying which."""
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RulesError([RuleError(where, None, "", "not a regular file")])
            raw = os.pread(fd, MAX_RULES_BYTES + 1, 0)
        finally:
            os.close(fd)
    except OSError as exc:
        raise RulesError([RuleError(where, None, "", f"cannot read: {exc.strerror or exc}")]) from exc
    if len(raw) > MAX_RULES_BYTES:
        raise RulesError([RuleError(where, None, "", f"too large: over {MAX_RULES_BYTES} bytes")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RulesError([RuleError(where, None, "", f"not UTF-8 text: {exc}")]) from exc


def load_rules_file(path: Path) -> RulesFile:
    """One rules file, validated; a file unchanged since it was last loaded is not parsed again (a queue
    of specs naming the same rules files, or the default set, costs one parse per change, not per spec)."""
    try:
        st = os.stat(path)
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    with _LOADED_LOCK:
        cached = _LOADED.get(key) if key is not None else None
    if cached is not None:
        return cached
    doc = load_rules_text(read_rules_text(path), str(path))
    if key is not None:
        with _LOADED_LOCK:  # the intake's worker thread and the daemon's loop both load rules
            if len(_LOADED) >= 64:
                _LOADED.pop(next(iter(_LOADED)))
            _LOADED[key] = doc
    return doc


_LOADED: dict[tuple[str, int, int, int], RulesFile] = {}  # (path, inode, size, mtime) -> the validated file
_LOADED_LOCK = threading.Lock()


def merge_rules(files: Sequence[RulesFile], disable: Iterable[str] = ()) -> tuple[list[Rule], float]:
    """Later files replace earlier rules of the same name (or switch them off with ``enabled: false``).

    Returns the enabled rules in definition order and the incident window of the last file that set one.
    """
    merged: dict[str, Rule] = {}
    window = 600.0
    for doc in files:
        if "incident_window_s" in doc.model_fields_set:
            window = doc.incident_window_s
        for rule in doc.rules:
            merged[rule.name] = rule
    off = list(disable)
    return [
        r for r in merged.values() if r.enabled and not any(fnmatchcase(r.name, pat) for pat in off)
    ], window


def check_files(paths: Sequence[Path]) -> list[RuleError]:
    """Every problem in these rules files, located; also names that `inhibits` lists but no file defines."""
    errors: list[RuleError] = []
    docs: list[tuple[Path, RulesFile]] = []
    for path in paths:
        try:
            docs.append((path, load_rules_file(path)))
        except RulesError as exc:
            errors.extend(exc.errors)
    if errors:
        return errors
    known = {r.name for _, doc in docs for r in doc.rules}
    for path, doc in docs:
        _data, lines = parse_yaml(read_rules_text(path), str(path))
        for i, rule in enumerate(doc.rules):
            for j, target in enumerate(rule.inhibits):
                if not any(fnmatchcase(name, target) for name in known):
                    errors.append(
                        RuleError(
                            str(path),
                            lines.get(("rules", i, "inhibits", j)) or lines.get(("rules", i, "inhibits")),
                            f"rules.{i}.inhibits.{j}",
                            f"no rule named {target!r} in these files",
                        )
                    )
    return errors


def load_ruleset_rules(
    paths: Sequence[Path] = (), *, use_default: bool = True, disable: Iterable[str] = ()
) -> tuple[list[Rule], float]:
    """The rules a run uses: the default set (unless opted out), the spec's files, minus disabled names."""
    all_paths = ([DEFAULT_RULES_PATH] if use_default else []) + list(paths)
    docs: list[RulesFile] = []
    errors: list[RuleError] = []
    for p in all_paths:
        try:
            docs.append(load_rules_file(p))
        except RulesError as exc:
            errors.extend(exc.errors)
    if errors:
        raise RulesError(errors)
    return merge_rules(docs, disable)


def spec_rules_problems(spec: JobSpec) -> list[str]:
    """Why the rules a spec asks for do not load (each `file:line: field: reason`), or [] when they do: a
    spec is refused for them at intake and at `shepherd submit`, not found out once its job runs."""
    try:
        load_ruleset_rules(spec.rules.files, use_default=spec.rules.use_default, disable=spec.rules.disable)
    except RulesError as exc:
        return [str(e) for e in exc.errors]
    return []
