"""What a hung job's stacks say, as pure functions: where most processes wait and which one is elsewhere (a
straggler, and its node to exclude), so the alert names the hang's place instead of attaching a wall of dumps.

Input: per process, its threads' frames (innermost first) from `py-spy dump --json` or from the trainer's own
`faulthandler` dump on a signal (parsed here); output: a `StackSummary` with words for people.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_THREADS = 256
MAX_FRAMES = 200
_FH_THREAD_RE = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):")
_FH_FRAME_RE = re.compile(r'^\s+File "(.*)", line (\d+) in (.+)$')
IDLE = frozenset({"main_loop"})  # Ray's actor loop between tasks: an idle actor, not a stuck one


@dataclass(frozen=True, slots=True)
class Frame:
    func: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.func} ({self.file.rsplit('/', 1)[-1]}:{self.line})"


@dataclass(frozen=True, slots=True)
class ProcStacks:
    """One process of the job: where its threads are (main thread first), and how that was learnt."""

    node: str
    pid: int
    name: str  # `driver`, or the Ray actor (`RolloutWorker`), from the process title
    method: str  # py-spy | faulthandler | none
    threads: tuple[tuple[str, tuple[Frame, ...]], ...] = ()  # (thread name, frames innermost first)
    error: str = ""

    @property
    def main(self) -> tuple[Frame, ...]:
        return self.threads[0][1] if self.threads else ()

    @property
    def place(self) -> str:
        """Where the process is: its main thread's innermost frame ('' when unknown)."""
        return str(self.main[0]) if self.main else ""

    @property
    def who(self) -> str:
        return f"{self.name} pid {self.pid} on {self.node}"


@dataclass(frozen=True, slots=True)
class StackSummary:
    """The forensics of one hang, for the alert, `shepherd status` and `shepherd logs --source forensics`."""

    processes: int
    methods: dict[str, int]  # how many processes' stacks each method gave
    waiting_place: str  # the frame where most processes of the largest group wait ('' when none)
    waiting: int  # how many wait there
    group: str  # the processes compared (`RolloutWorker`, `driver`)
    group_size: int
    stacks_of: dict[str, str] = field(default_factory=dict)  # process -> its place (the driver's included)
    stragglers: tuple[str, ...] = ()  # processes of the group that are elsewhere (`who: place`)
    exclude_node: str | None = None  # the one node all stragglers are on, offered for the resume
    unanswered: tuple[str, ...] = ()  # nodes that did not answer in time
    notes: tuple[str, ...] = ()

    def headline(self) -> str:
        if not self.processes:
            return "no stacks captured" + (
                f" (no answer from {', '.join(self.unanswered)})" if self.unanswered else ""
            )
        how = ", ".join(f"{n} by {m}" for m, n in sorted(self.methods.items()))
        head = f"{self.processes} process(es) ({how})"
        if self.waiting_place:
            head += f"; {self.waiting} of {self.group_size} {self.group} wait in {self.waiting_place}"
        if self.stragglers:
            head += f"; elsewhere: {'; '.join(self.stragglers)}"
        if self.exclude_node:
            head += f"; exclude_node {self.exclude_node} offered"
        if self.unanswered:
            head += f"; no answer from {', '.join(self.unanswered)}"
        return head

    def text(self) -> str:
        lines = [self.headline()]
        lines += [f"  {who}: {place or '?'}" for who, place in self.stacks_of.items()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "processes": self.processes,
            "methods": dict(self.methods),
            "waiting_place": self.waiting_place,
            "waiting": self.waiting,
            "group": self.group,
            "group_size": self.group_size,
            "stacks_of": dict(self.stacks_of),
            "stragglers": list(self.stragglers),
            "exclude_node": self.exclude_node,
            "unanswered": list(self.unanswered),
            "notes": list(self.notes),
            "headline": self.headline(),
        }


def process_name(cmdline: Sequence[str]) -> str:
    """`RolloutWorker` for a Ray actor (its title is `ray::RolloutWorker.generate`), else `driver`."""
    first = cmdline[0] if cmdline else ""
    if first.startswith("ray::"):
        return first[5:].split(".", 1)[0].split(" ", 1)[0] or "ray-worker"
    return "driver"


def from_pyspy(data: Any) -> tuple[tuple[str, tuple[Frame, ...]], ...]:
    """`py-spy dump --json` (a list of threads) -> threads, the main one (os thread id == pid) first."""
    if not isinstance(data, list):
        return ()
    threads: list[tuple[bool, str, tuple[Frame, ...]]] = []
    for t in data[:MAX_THREADS]:
        if not isinstance(t, dict):
            continue
        frames = tuple(
            Frame(str(f.get("name", "?")), str(f.get("filename", "?")), _int(f.get("line")))
            for f in (t.get("frames") or [])[:MAX_FRAMES]
            if isinstance(f, dict)
        )
        main = t.get("thread_name") == "MainThread" or (
            t.get("os_thread_id") is not None and t.get("os_thread_id") == t.get("pid")
        )
        threads.append((main, str(t.get("thread_name") or t.get("os_thread_id") or "?"), frames))
    threads.sort(key=lambda x: not x[0])
    return tuple((name, frames) for _, name, frames in threads)


def from_faulthandler(text: str) -> tuple[tuple[str, tuple[Frame, ...]], ...]:
    """One `faulthandler` dump of all threads (what the trainer wrote on the signal) -> threads; the one that
    handled the signal (`Current thread`: the main thread, for a signal sent to the process) first."""
    threads: list[tuple[bool, str, list[Frame]]] = []
    cur: list[Frame] | None = None
    for line in text.splitlines():
        m = _FH_THREAD_RE.match(line)
        if m and len(threads) < MAX_THREADS:
            cur = []
            threads.append((m.group(1) == "Current thread", m.group(2), cur))
            continue
        f = _FH_FRAME_RE.match(line)
        if f and cur is not None and len(cur) < MAX_FRAMES:
            cur.append(Frame(f.group(3).strip(), f.group(1), int(f.group(2))))
        elif line.strip() and not line.startswith(" "):
            cur = None  # anything else ends the thread's frames
    threads.sort(key=lambda x: not x[0])
    return tuple(("current" if current else tid, tuple(frames)) for current, tid, frames in threads)


def summarise(procs: Sequence[ProcStacks], unanswered: Sequence[str] = ()) -> StackSummary:
    """Where most processes of the largest group (the Ray workers; the driver when alone) wait, and which of
    that group are elsewhere. A straggler needs a clear majority elsewhere (more than half of at least 3)."""
    known = [p for p in procs if p.place]
    methods = Counter(p.method for p in procs if p.method != "none")
    notes = tuple(f"{p.who}: {p.error}" for p in procs if p.error)[:20]
    stacks_of = {p.who: p.place for p in procs}
    if not known:
        return StackSummary(
            len(known), dict(methods), "", 0, "", 0, stacks_of, unanswered=tuple(unanswered), notes=notes
        )
    groups = Counter(p.name for p in known)
    workers = [n for n in groups if n != "driver"]

    def busy(name: str) -> bool:  # a group of actors all between tasks is not where a hang is
        return any(p.main and p.main[0].func.rsplit(".", 1)[-1] not in IDLE for p in known if p.name == name)

    group = max(workers, key=lambda n: (groups[n], busy(n))) if workers else "driver"
    members = [p for p in known if p.name == group]
    places = Counter(p.place for p in members)
    place, count = places.most_common(1)[0]
    stragglers: tuple[str, ...] = ()
    exclude: str | None = None
    if len(members) >= 3 and count * 2 > len(members):
        odd = [p for p in members if p.place != place]
        stragglers = tuple(f"{p.who}: {p.place}" for p in odd)
        nodes = {p.node for p in odd}
        all_nodes = {p.node for p in known}
        if len(nodes) == 1 and len(all_nodes) > 1:
            exclude = next(iter(nodes))
    return StackSummary(
        processes=len(known),
        methods=dict(methods),
        waiting_place=place,
        waiting=count,
        group=group,
        group_size=len(members),
        stacks_of=stacks_of,
        stragglers=stragglers,
        exclude_node=exclude,
        unanswered=tuple(unanswered),
        notes=notes,
    )


def render(p: ProcStacks) -> str:
    """One process's stacks as text (the stacks file under the run folder)."""
    out = [f"== {p.who} ({p.method})" + (f": {p.error}" if p.error else "")]
    for name, frames in p.threads:
        out.append(f"Thread {name}:")
        out += [f"    {f}  [{f.file}]" for f in frames]
    return "\n".join(out)


def _int(x: object) -> int:
    return int(x) if isinstance(x, int) and not isinstance(x, bool) else 0
