"""The decisive line of a log no rule recognised (the final exception of its last traceback, else its last
error line) and a starting rule built from it, so an unknown failure shows its cause and becomes a rule."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import yaml

from supervisor.rules.state import EXCERPT_CHARS, TRACEBACK_MARK
from supervisor.watch.lines import normalise_text

# `ValueError: x`, `torch.OutOfMemoryError: x`, `ray.exceptions.RayTaskError(ValueError): x`, `StopIteration`
_EXCEPTION_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<name>[A-Za-z_]\w*)(?:\([\w.]+\))?(?::\s|:$|$)")
# A line a logger or Slurm wrote at error level: `ERROR ...`, `FATAL ...`, `srun: error: ...`,
# `slurmstepd: error: ...`, `Error: ...`, `RuntimeError: ...` outside a traceback.
_ERROR_RE = re.compile(r"\b(?:ERROR|FATAL|CRITICAL)\b|(?:Error|Exception|error):\s|\bError\b")

# The parts of a line that change from one occurrence of a failure to the next, most specific first, and
# the RE2 pattern each becomes in a suggested rule.
_VARIABLE_PARTS = (
    (r"(?:[A-Za-z]:)?(?:/[^\s/'\",:;()\[\]]*){2,}|~/[^\s'\",:;()\[\]]+", r"\S+"),  # paths
    (r"\b0[xX][0-9A-Fa-f]+\b", r"0x[0-9A-Fa-f]+"),  # addresses
    (r"\b[0-9A-Fa-f]*(?:[0-9][A-Fa-f]|[A-Fa-f][0-9])[0-9A-Fa-f]{6,}\b", r"[0-9A-Fa-f]+"),  # ids, hashes
    (r"\d+(?:\.\d+)*", r"[0-9.]+"),  # numbers, versions, addresses
)
_VARIABLE_RE = re.compile("|".join(f"({p})" for p, _ in _VARIABLE_PARTS))
_REGEX_META = frozenset("\\.^$|?*+()[]{}")
_SIGNATURE_CHARS = 400  # a suggested regex stays readable (and far under the loader's 4,096)


@dataclass(frozen=True, slots=True)
class DecisiveLine:
    """The line that says why a log's process ended, where it is, and a regex that finds it again."""

    source: str  # the file's name (ray-driver.log, slurm-123.out)
    line: int  # 1-based line number in that file
    text: str  # the line with Ray/rank prefixes removed, clipped like a matched rule's excerpt
    kind: Literal["exception", "error"]
    signature: str  # a regex (RE2) for this line with its variable parts generalised

    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def as_dict(self) -> dict[str, str | int]:
        return {
            "source": self.source,
            "line": self.line,
            "text": self.text,
            "kind": self.kind,
            "signature": self.signature,
        }


def decisive_line(text: str, source: str, first_line: int = 1) -> DecisiveLine | None:
    """The final exception of the last traceback in `text` (chained, Ray- or rank-prefixed ones included),
    else the last error-level line, else None. `first_line` is the number of the text's first line in its
    file (a tail of a long log)."""
    batch = normalise_text(text)
    lines = batch.texts
    for i in range(len(lines) - 1, -1, -1):
        if TRACEBACK_MARK in lines[i]:  # the last header: a chain ends with the exception that ended it
            found = _final_exception(lines, i, batch.prefixes)
            if found is not None:
                return _decisive(source, first_line + found, lines[found], "exception")
    for i in range(len(lines) - 1, -1, -1):
        if _ERROR_RE.search(lines[i]) and lines[i].strip():
            return _decisive(source, first_line + i, lines[i], "error")
    return None


def _final_exception(lines: list[str], header: int, prefixes: dict[int, str]) -> int | None:
    """The index of the traceback's last exception line: its first unindented line, or a later one that
    follows more `File ...` lines (Ray's RayTaskError quotes the worker's traceback after its own line).
    A prefixed header (`[rank3]:`, `(Worker pid=7)`) reads only the lines of the same prefix (other ranks'
    lines interleave)."""
    prefix = prefixes.get(header, "")
    found: int | None = None
    indented_since = False
    for j in range(header + 1, len(lines)):
        if prefix and prefixes.get(j, "") != prefix:
            continue
        line = lines[j]
        if not line.strip():
            if found is not None:
                break
            continue
        if line[0] in " \t":
            indented_since = True
            continue
        if found is None:
            found, indented_since = j, False
        elif indented_since and _EXCEPTION_RE.match(line.strip()):
            found, indented_since = j, False
        else:
            break
    return found


def _decisive(source: str, line_no: int, text: str, kind: Literal["exception", "error"]) -> DecisiveLine:
    line = text.strip()
    return DecisiveLine(source, line_no, line[:EXCERPT_CHARS], kind, line_signature(line))


def line_signature(line: str) -> str:
    """A regex (RE2 syntax) matching this line and its siblings: literal text escaped, numbers, hex ids and
    paths generalised; never anchored (prefixes stack up in front of real messages)."""
    out: list[str] = []
    pos = 0
    for m in _VARIABLE_RE.finditer(line):
        out.append(_escape(line[pos : m.start()]))
        group = m.lastindex or 1
        out.append(_VARIABLE_PARTS[group - 1][1])
        pos = m.end()
    out.append(_escape(line[pos:]))
    sig = re.sub(r"\s+", r"\\s+", "".join(out).strip())
    return _clip_regex(sig)


def _escape(text: str) -> str:
    """Escape regex metacharacters only (`re.escape` also escapes spaces and `-`, which RE2 may refuse)."""
    return "".join(f"\\{c}" if c in _REGEX_META else c for c in text)


def _clip_regex(sig: str) -> str:
    """Cut a long regex at a point that leaves it valid: never inside an escape or a class."""
    if len(sig) <= _SIGNATURE_CHARS:
        return sig
    cut = sig[:_SIGNATURE_CHARS]
    open_class = cut.rfind("[")
    if open_class > cut.rfind("]") and (open_class == 0 or cut[open_class - 1] != "\\"):
        cut = cut[:open_class]
    trailing = len(cut) - len(cut.rstrip("\\"))
    if trailing % 2:
        cut = cut[:-1]
    return cut


def rule_name(d: DecisiveLine) -> str:
    """A name for the suggested rule: the exception's class in kebab case (`value-error`), or
    `unrecognised-error` for a plain error line."""
    m = _EXCEPTION_RE.match(d.text) if d.kind == "exception" else None
    if m is None:
        return "unrecognised-error"
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", m.group("name")).lower()
    return re.sub(r"[^a-z0-9-]+", "-", words).strip("-") or "unrecognised-error"


def source_glob(source: str) -> str:
    """The file-name glob a suggested rule reads: a job's own output file stands for every job's."""
    return re.sub(r"\d+", "*", source) if source.startswith("slurm-") else source


def suggest_rule(d: DecisiveLine, *, run: str = "", attempt: int | None = None) -> str:
    """A rules file (YAML, version 1) holding one rule that fires on this line and alerts: a start to edit
    (the actions, the category, the regex's precision), checked by `shepherd rules check`."""
    rule = {
        "name": rule_name(d),
        "description": d.text[:120],
        "priority": 50,
        "category": "failure",
        "retryable": False,
        "deterministic": True,
        "trigger": {"kind": "log", "regex": d.signature, "sources": [source_glob(d.source)]},
        "actions": [{"alert": {"level": "error", "message": "{run}: " + rule_name(d) + ": {excerpt}"}}],
    }
    body = yaml.safe_dump(
        {"version": 1, "rules": [rule]}, sort_keys=False, allow_unicode=True, width=1_000_000
    )
    origin = f"{run} attempt {attempt}, " if run and attempt is not None else (f"{run}, " if run else "")
    header = (
        f"# Suggested from {origin}{d.where()}:\n"
        f"#   {d.text}\n"
        "# A starting point: check the regex against other logs (`shepherd rules test LOG --rules FILE`),\n"
        "# then choose the actions (resume, give_up, hold: docs/rules.md) and add the file to the spec's\n"
        "# `rules.files`.\n"
    )
    return header + body
