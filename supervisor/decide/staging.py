"""Resume a trainer that always resumes from its newest ``step_N`` (NeMo RL) from another checkpoint.

NeMo RL has no "resume from X": it takes the highest ``step_N`` in ``checkpointing.checkpoint_dir``. To
resume from ``best`` or ``step_N`` shepherd stages a fresh dir
``<checkpoint.dir>.staged/<run>/attempt-<n>/`` holding a hard-linked copy of the chosen ``step_N`` (NeMo
RL's retention may `rmtree` it: only the copy's names go) and points the next attempt at it; newer
checkpoints in the original dir are never touched. The staged dir sits beside the checkpoint dir, on the
shared filesystem the job already reads (hard links need that). Later resumes look in the dir the last
attempt used (its *lineage*, where the trainer wrote new steps) as well as the original.

`place` is pure (listings in, decision out); `act/checkpoints.py` is the thin I/O shell that stages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from supervisor.decide.checkpoints import Checkpoint, candidates, rank

STEP_RE = re.compile(r"step_\d+")


@dataclass(frozen=True, slots=True)
class Placement:
    """Where to resume from: the checkpoint, the dir holding it, and whether a staged dir must link it."""

    checkpoint: Checkpoint | None
    source_dir: str | None
    stage: bool
    reason: str


def place(
    found: Mapping[str, Sequence[Checkpoint]],
    selector: str,
    *,
    lineage: str,
    higher_is_better: bool = True,
    keep_top_k: int | None = None,
    exists: Callable[[str, str], bool] = lambda _d, _n: True,
    before_step: int | None = None,
) -> Placement:
    """Choose among the checkpoints of several dirs; `lineage` is the dir the last attempt trained in.

    ``latest`` means the newest step of the lineage (what the trainer itself would resume from, so never
    staged); ``best`` ranks every dir together (lineage first on ties); ``step_N`` prefers the lineage's copy.
    Staging is needed when the trainer, pointed at the chosen checkpoint's dir, would pick a newer step.
    `before_step` (a rollback) leaves out the checkpoints saved at or after that step.
    """
    dirs = [lineage, *(d for d in found if d != lineage)]
    flat: list[Checkpoint] = []
    where: dict[str, tuple[str, Checkpoint]] = {}
    for d in dirs:
        for cp in found.get(d, ()):
            key = f"{d}/{cp.name}"
            flat.append(Checkpoint(name=key, step=cp.step, metric=cp.metric))
            where[key] = (d, cp)
    by_lineage = sorted((c for c in flat if where[c.name][0] == lineage), key=lambda c: -c.step)
    by_lineage += sorted((c for c in flat if where[c.name][0] != lineage), key=lambda c: -c.step)
    if before_step is not None:
        by_lineage = [c for c in by_lineage if c.step < before_step]
    if selector == "best":
        order = candidates(
            flat, selector, higher_is_better=higher_is_better, keep_top_k=keep_top_k, before_step=before_step
        )
    elif selector == "latest" or STEP_RE.fullmatch(selector):
        exact = [c for c in by_lineage if where[c.name][1].name == selector]
        order = exact + [c for c in by_lineage if c not in exact]
    else:
        raise ValueError(f"unknown checkpoint selector {selector!r}: use latest, best or step_N")
    gone: list[str] = []
    if selector.startswith("step_") and not any(where[c.name][1].name == selector for c in order):
        gone.append(f"{selector} not found")
    for c in order:
        d, cp = where[c.name]
        if not exists(d, cp.name):
            gone.append(f"{cp.name} vanished")
            continue
        newest = max(x.step for x in found.get(d, ()))
        stage = cp.step != newest
        what = {"best": "best", "latest": "latest"}.get(selector, "requested")
        if before_step is not None:
            what += f" before step {before_step}"
        metric = f", metric {cp.metric:g}" if cp.metric is not None else ""
        how = f"{cp.name} ({what}{metric})" if not gone else f"{'; '.join(gone)}: falling back to {cp.name}"
        if stage:
            how += f"; staged in a fresh checkpoint dir (step_{newest} is newer in {d})"
        return Placement(cp, d, stage, f"resuming from {how}")
    if gone:
        why = f"no usable checkpoint ({', '.join(gone)}): starting from scratch"
        return Placement(None, None, False, why)
    if before_step is not None:
        return Placement(None, None, False, f"no complete checkpoint before step {before_step}")
    return Placement(None, None, False, "no complete checkpoint yet: starting from scratch")


def staged_root(checkpoint_dir: Path, run_id: str) -> Path:
    return checkpoint_dir.parent / f"{checkpoint_dir.name}.staged" / run_id


def fresh_name(existing: Sequence[str], attempt: int) -> str:
    """`attempt-<n>`, or `attempt-<n>.<k>` when that name is taken (a decision carried out again)."""
    base = f"attempt-{attempt}"
    if base not in existing:
        return base
    k = 2
    while f"{base}.{k}" in existing:
        k += 1
    return f"{base}.{k}"


def trainer_dir(original: Path, checkpoint: str | None) -> str | None:
    """The dir to point the trainer at for `checkpoint`: its parent unless that is the spec's own dir."""
    if checkpoint is None:
        return None
    parent = Path(checkpoint).parent
    return None if parent == original else str(parent)


@dataclass(frozen=True, slots=True)
class Kept:
    """One step a run can resume from: where it is, its metric, and whether it is the best or the latest."""

    name: str
    step: int
    metric: float | None
    dir: str
    best: bool = False
    latest: bool = False


def kept_steps(
    found: Mapping[str, Sequence[Checkpoint]], *, lineage: str, higher_is_better: bool = True
) -> list[Kept]:
    """The steps of a run's checkpoint dirs, newest first, each once (the lineage's copy first, as `place`
    prefers it). `latest` marks the lineage's newest step (what the trainer resumes from by itself), `best`
    the best metric of them all (ties: the newer step)."""
    seen: dict[str, Kept] = {}
    for d in [lineage, *(d for d in found if d != lineage)]:
        for cp in found.get(d, ()):
            seen.setdefault(cp.name, Kept(cp.name, cp.step, cp.metric, d))
    rows = sorted(seen.values(), key=lambda k: -k.step)
    newest = max((cp.step for cp in found.get(lineage, ())), default=None)
    ranked = rank([Checkpoint(k.name, k.step, k.metric) for k in rows], higher_is_better)
    best = ranked[0].name if ranked and ranked[0].metric is not None else None
    return [Kept(k.name, k.step, k.metric, k.dir, best=k.name == best, latest=k.step == newest) for k in rows]


def describe_kept(rows: Sequence[Kept], metric: str | None) -> str:
    """`step_30 (val:accuracy 0.41, latest), step_10 (val:accuracy 0.53, best)`, or that there are none."""
    if not rows:
        return "no complete checkpoint yet"
    parts = []
    for k in rows:
        notes = [f"{metric or 'metric'} {k.metric:g}"] if k.metric is not None else []
        notes += [w for w, on in (("best", k.best), ("latest", k.latest)) if on]
        parts.append(f"{k.name} ({', '.join(notes)})" if notes else k.name)
    return ", ".join(parts)
