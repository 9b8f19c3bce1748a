"""The checkpoint to resume from, on disk: choose among the spec's (and a staged lineage's) steps, and
stage a fresh dir when a trainer that always resumes from its newest step must start from another one.

The choice itself is pure (decide/checkpoints.py, decide/staging.py); this module lists dirs and makes
the staged dir with its link.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from supervisor.decide.checkpoints import choose_in_dir, discover, list_checkpoint_dir
from supervisor.decide.staging import Kept, fresh_name, kept_steps, place, staged_root
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunRow
from supervisor.domain.spec import JobSpec
from supervisor.domain.trainer_files import INFO_FILE, STEP_DIR_RE


def newest_checkpoint_step(spec: JobSpec, checkpoint_dir: str | None = None) -> int | None:
    """The newest complete step in `checkpoint_dir` (a staged dir an attempt trained in) or the spec's dir."""
    if spec.checkpoint is None:
        return None
    where = Path(checkpoint_dir) if checkpoint_dir else spec.checkpoint.dir
    cps = discover(list_checkpoint_dir(where), spec.checkpoint.metric)
    return max((c.step for c in cps), default=None)


def run_checkpoints(spec: JobSpec, lineage: str | None = None) -> list[Kept]:
    """The steps a run can resume from, in the spec's dir and the dir its last attempt trained in."""
    if spec.checkpoint is None:
        return []
    original = spec.checkpoint.dir
    line = Path(lineage) if lineage else original
    dirs = [line] if line == original else [line, original]
    found = {str(d): discover(list_checkpoint_dir(d), spec.checkpoint.metric) for d in dirs}
    return kept_steps(found, lineage=str(line), higher_is_better=spec.checkpoint.higher_is_better)


def keep_the_choice(
    spec: JobSpec, overrides: AttemptOverrides, *, run_id: str, attempt: int, settled: bool = True
) -> AttemptOverrides:
    """The overrides to submit, so that a self-resuming trainer still loads the checkpoint that was chosen.

    The choice is made while the failed job may still run, and a trainer stopped by scancel's SIGTERM saves
    one more step on its way out (ours does; NeMo RL does at its save deadline). A trainer that resumes from
    its dir's newest step would load that one (after a NaN: the poisoned weights), so a pinned choice that is
    no longer the newest is staged at submission. `settled`: Slurm said the old job ended. Until then (it is
    COMPLETING: Slurm marks a cancelled job so at once, while its processes are still being stopped) a save
    may still land after this look, so a pinned choice is staged even while it is the newest.
    """
    ck = spec.checkpoint
    chosen = Path(overrides.checkpoint) if overrides.checkpoint else None
    if ck is None or chosen is None or not overrides.pinned or spec.resume.pass_checkpoint is not None:
        return overrides
    if overrides.checkpoint_dir is not None or chosen.parent != Path(ck.dir):
        return overrides  # already staged: nothing else writes there
    m = STEP_DIR_RE.match(chosen.name)
    newest = newest_checkpoint_step(spec)
    if m is None or not chosen.is_dir() or (settled and (newest is None or newest <= int(m.group(1)))):
        return overrides
    staged = stage(staged_root(ck.dir, run_id), chosen, attempt)
    return replace(overrides, checkpoint=str(staged / chosen.name), checkpoint_dir=str(staged))


def resolve_checkpoint(
    spec: JobSpec,
    selector: str,
    *,
    run_id: str = "",
    attempt: int = 0,
    lineage: str | None = None,
    before_step: int | None = None,
) -> tuple[str | None, str]:
    """(path or None, why) for latest / best / step_N among the spec's checkpoints.

    A trainer that resumes by itself (`pass_checkpoint: null`, NeMo RL) gets a staged dir when the choice is
    not its own newest step (supervisor/staging.py); `lineage` is the dir the last attempt trained in;
    `before_step` (a rollback) leaves out checkpoints saved at or after that step.
    """
    if spec.checkpoint is None:
        return None, "the spec names no checkpoint dir: the trainer resumes by itself"
    ck = spec.checkpoint
    if not Path(ck.dir).is_dir():
        return None, f"the checkpoint dir {ck.dir} is missing (removed?): resuming from scratch"
    fallback = ""
    if selector != "latest" and spec.cannot_pick_checkpoint:
        # A rule's `resume.from`: carried out as far as it can be, saying why not further.
        fallback = f"{selector} cannot be loaded ({spec.cannot_pick_checkpoint}); "
        selector = "latest"
    if spec.resume.pass_checkpoint is None and run_id:
        path, why = stage_or_choose(
            ck.dir,
            selector,
            run_id=run_id,
            attempt=attempt,
            lineage=lineage,
            metric=ck.metric,
            higher_is_better=ck.higher_is_better,
            keep_top_k=ck.keep_top_k,
            before_step=before_step,
        )
        return path, (fallback if path else "") + why
    choice, found = choose_in_dir(
        ck.dir,
        selector,
        metric=ck.metric,
        higher_is_better=ck.higher_is_better,
        keep_top_k=ck.keep_top_k,
        before_step=before_step,
    )
    return (str(found) if found else None), (fallback if found else "") + choice.reason


def resolve_checkpoint_for_run(
    run: RunRow, selector: str, *, attempt: int = 0, lineage: str | None = None
) -> tuple[str | None, str]:
    return resolve_checkpoint(run.spec, selector, run_id=run.id, attempt=attempt, lineage=lineage)


def stage(root: Path, source: Path, attempt: int) -> Path:
    """A new dir under `root` holding a copy of `source` (a ``step_N``) made of hard links.

    Not a symlink: NeMo RL's retention `rmtree`s steps that drop out of its top-k, and `rmtree` raises on a
    symlink (v0.6.0 crashes the run). A hard-linked copy is a real directory: deleting it removes only its
    own names, the user's checkpoint keeps every file. Checkpoints are written once and never modified in
    place, so sharing their inodes is safe. Where hard links fail (another filesystem), files are copied.
    """
    root.mkdir(parents=True, exist_ok=True)
    target = root / fresh_name([p.name for p in root.iterdir()], attempt)
    target.mkdir()
    link_tree(source.resolve(), target / source.name)
    return target


def link_tree(source: Path, dest: Path) -> None:
    """`dest` mirrors `source`: directories made, files hard-linked (copied when a link is refused)."""
    dest.mkdir()
    for entry in sorted(source.iterdir()):
        to = dest / entry.name
        if entry.is_dir() and not entry.is_symlink():
            link_tree(entry, to)
            continue
        try:
            os.link(entry, to, follow_symlinks=True)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
            shutil.copy2(entry, to)


def stage_or_choose(
    original: Path,
    selector: str,
    *,
    run_id: str,
    attempt: int,
    lineage: str | None = None,
    metric: str | None = None,
    higher_is_better: bool = True,
    keep_top_k: int | None = None,
    before_step: int | None = None,
) -> tuple[str | None, str]:
    """(path the next attempt resumes from, why): looks in the original dir and the lineage, stages if needed.

    The returned path is inside the dir the trainer must read (`trainer_dir` gives it): the original dir, the
    lineage, or a freshly staged dir.
    """
    line = Path(lineage) if lineage else original
    dirs = [line] if line == original else [line, original]
    found = {str(d): discover(list_checkpoint_dir(d), metric) for d in dirs}
    p = place(
        found,
        selector,
        lineage=str(line),
        higher_is_better=higher_is_better,
        keep_top_k=keep_top_k,
        exists=lambda d, n: (Path(d) / n / INFO_FILE).is_file(),
        before_step=before_step,
    )
    if p.checkpoint is None or p.source_dir is None:
        return None, p.reason
    source = Path(p.source_dir) / p.checkpoint.name
    if not p.stage:
        return str(source), p.reason
    staged = stage(staged_root(original, run_id), source, attempt)
    return str(staged / p.checkpoint.name), f"{p.reason}: {staged}"


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a trainer's config.yaml is kilobytes; anything larger is not read


def config_int(step_dir: Path, section: str, key: str) -> int | None:
    """A positive integer `section.key` from a checkpoint's own `config.yaml` (NeMo RL and our trainer write
    it), or None when the file, the key or a sane value is not there."""
    path = step_dir / "config.yaml"
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        cfg: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    part = cfg.get(section) if isinstance(cfg, dict) else None
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def max_steps(step_dir: Path) -> int | None:
    """`grpo.max_num_steps` from the checkpoint's own `config.yaml`."""
    return config_int(step_dir, "grpo", "max_num_steps")


def unfinished(spec: JobSpec, lineage: str | None = None) -> str | None:
    """Why a run whose job exited 0 has steps left, from its newest checkpoint, or None (it is done).

    NeMo RL returns normally, exit 0, when its save deadline runs out: a newest checkpoint below
    `grpo.max_num_steps` says the chain must go on even when its "Timeout has been reached" line was lost.
    """
    if spec.checkpoint is None:
        return None
    where = Path(lineage) if lineage else spec.checkpoint.dir
    found = discover(list_checkpoint_dir(where), None)
    if not found:
        return None
    newest = found[0]
    limit = max_steps(where / newest.name)
    if limit is None or newest.step >= limit:
        return None
    return f"its newest checkpoint {newest.name} is below grpo.max_num_steps={limit}"
