"""The queue folder: claim good specs, reject bad ones with a precise reason.

A spec is claimed by an atomic rename into `runs/<run-id>/spec.yaml`, so a
half-written file is never read twice and two daemons never submit the same
spec. A bad spec is moved (never deleted) to `rejected/` beside an
`.error.txt` that says exactly what is wrong, and a `.rejection.json` record
that keeps the run id `shepherd submit` printed, so `shepherd status ID` finds it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from supervisor.domain.envfiles import PASS_ENV_FILE, EnvFileError, read_secret_env, write_private_env_file
from supervisor.domain.spec import MAX_SPEC_BYTES, JobSpec, check_spec_files, load_spec
from supervisor.domain.yamlpos import YamlDocumentError

log = structlog.get_logger(__name__)

SPEC_SUFFIXES = (".yaml", ".yml")
RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}-\d{8}-\d{6}-[0-9a-f]{4}")


def is_candidate(name: str) -> bool:
    """Spec files only: not editor swap/backup files, hidden files or partial uploads."""
    if name.startswith((".", "#", "~")) or name.endswith(("~", ".swp", ".swx", ".tmp", ".part", ".partial")):
        return False
    return name.endswith(SPEC_SUFFIXES)


def new_run_id(name: str, now: float) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{name[:40]}-{stamp}-{secrets.token_hex(2)}"


def queue_dir_problem(queue_dir: Path) -> str | None:
    """Why the queue folder is unsafe to take specs from, or None.

    Whoever can write into the queue can make the daemon submit jobs, so only the daemon's user may: the
    folder must be owned by that uid and writable by nobody else (no group or other write bit). Files in it
    are checked too (owner, no symlinks), but a folder others can write lets them race those checks.
    """
    try:
        st = queue_dir.stat()
    except FileNotFoundError:
        return None
    if st.st_uid != os.getuid():
        return f"{queue_dir} is owned by uid {st.st_uid}, but the daemon runs as uid {os.getuid()}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = (
            "group and others"
            if st.st_mode & stat.S_IWGRP and st.st_mode & stat.S_IWOTH
            else ("group" if st.st_mode & stat.S_IWGRP else "others")
        )
        return (
            f"{queue_dir} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o}): whoever can write there "
            f"can make shepherd submit jobs; fix with `chmod go-w {queue_dir}`"
        )
    return None


PASS_ENV_SUFFIX = ".pass_env"


def pass_env_sidecar(queued: Path) -> Path:
    """Where `shepherd submit` keeps a queued spec's pass_env values (0600; never taken for a spec)."""
    return queued.with_name(queued.name + PASS_ENV_SUFFIX)


def keep_pass_env(queued: Path, values: dict[str, str]) -> None:
    """Write the sidecar of a spec about to be queued at `queued` (before the spec itself: the daemon never
    sees the spec without it)."""
    tmp = queued.with_name(f".{queued.name}{PASS_ENV_SUFFIX}.tmp")
    tmp.unlink(missing_ok=True)
    write_private_env_file(tmp, values)
    os.replace(tmp, pass_env_sidecar(queued))


def pass_env_problems(queued: Path, names: list[str]) -> list[str]:
    """Why a queued spec's pass_env cannot be honoured: its values come only from `shepherd submit`."""
    sidecar = pass_env_sidecar(queued)
    if not sidecar.exists():
        return [
            f"pass_env: {', '.join(names)}: values are taken from the shell that runs `shepherd submit`; "
            "a spec put into the queue by hand cannot name pass_env (use env_files)"
        ]
    try:
        read_secret_env([], names, sidecar)
    except EnvFileError as exc:
        return [f"pass_env: {exc}"]
    return []


def take_pass_env(queued: Path, run_dir: Path) -> Path:
    """Move a claimed spec's pass_env values beside the run (runs/<id>/pass_env.env, still 0600)."""
    kept = run_dir / PASS_ENV_FILE
    os.rename(pass_env_sidecar(queued), kept)
    return kept


@dataclass(frozen=True, slots=True)
class Claimed:
    run_id: str
    spec: JobSpec
    spec_path: Path


@dataclass(frozen=True, slots=True)
class Rejected:
    """A spec refused at intake; `run_id`: the id `shepherd submit` printed for it (None for a file dropped
    into the queue by hand, which never had one)."""

    source: Path
    moved_to: Path
    errors: list[str]
    run_id: str | None = None
    at: float = 0.0

    @property
    def error_file(self) -> Path:
        return self.moved_to.with_suffix(ERROR_SUFFIX)

    @property
    def record_file(self) -> Path:
        return self.moved_to.with_suffix(RECORD_SUFFIX)


ERROR_SUFFIX = ".error.txt"
RECORD_SUFFIX = ".rejection.json"


def submitted_run_id(path: Path) -> str | None:
    """The run id a queued file carries in its name: `shepherd submit` names it `<run-id>.yaml`."""
    return path.stem if RUN_ID_RE.fullmatch(path.stem) else None


def read_rejection(error_file: Path) -> Rejected | None:
    """A rejection as recorded beside its spec in rejected/ (None if it is gone or unreadable); a rejection
    from before records were kept is read from its `.error.txt` alone."""
    stem = error_file.name.removesuffix(ERROR_SUFFIX)
    moved_to = next(
        (p for s in SPEC_SUFFIXES if (p := error_file.with_name(stem + s)).exists()),
        error_file.with_name(stem + SPEC_SUFFIXES[0]),
    )
    try:
        data = json.loads(error_file.with_name(stem + RECORD_SUFFIX).read_text(encoding="utf-8"))
        return Rejected(
            Path(str(data["source"])),
            Path(str(data["moved_to"])),
            [str(e) for e in data["errors"]],
            run_id=str(data["run_id"]) if data.get("run_id") else None,
            at=float(data["at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        text = error_file.read_text(encoding="utf-8", errors="replace")
        at = error_file.stat().st_mtime
    except OSError:
        return None
    errors = [line[4:] for line in text.splitlines() if line.startswith("  - ")]
    return Rejected(moved_to, moved_to, errors, run_id=submitted_run_id(moved_to), at=at)


def recent_rejections(rejected_dir: Path, limit: int) -> tuple[list[Rejected], int]:
    """The newest `limit` rejections, newest first, and how many rejected/ holds in all."""
    notes: list[tuple[float, Path]] = []
    try:
        with os.scandir(rejected_dir) as entries:
            for entry in entries:
                if entry.name.endswith(ERROR_SUFFIX):
                    try:
                        notes.append((entry.stat().st_mtime, Path(entry.path)))
                    except OSError:
                        continue
    except FileNotFoundError:
        return [], 0
    notes.sort(reverse=True)
    found = [r for _, note in notes[:limit] if (r := read_rejection(note)) is not None]
    return found, len(notes)


def find_rejection(rejected_dir: Path, ref: str) -> Rejected | None:
    """The newest rejection of the run id `ref` (or of the file named `ref` in the queue)."""
    if "/" in ref or not ref:
        return None
    # A spec is kept as rejected/<its queue name>.yaml, or <that>-<time>-<hex>.yaml when the name was taken.
    pattern = str(rejected_dir / (glob.escape(ref) + "*" + ERROR_SUFFIX))
    matches = []
    for note in glob.glob(pattern):
        r = read_rejection(Path(note))
        if r is not None and (r.run_id == ref or r.source.stem == ref):
            matches.append(r)
    return max(matches, key=lambda r: r.at, default=None)


def queued_specs(queue_dir: Path) -> list[tuple[Path, float]]:
    """Spec files waiting in the queue, oldest first, with when each was written."""
    found: list[tuple[Path, float]] = []
    try:
        with os.scandir(queue_dir) as entries:
            for entry in entries:
                if is_candidate(entry.name):
                    try:
                        found.append((Path(entry.path), entry.stat(follow_symlinks=False).st_mtime))
                    except OSError:
                        continue
    except FileNotFoundError:
        return []
    return sorted(found, key=lambda f: (f[1], f[0].name))


class Intake:
    def __init__(
        self,
        queue_dir: Path,
        runs_dir: Path,
        rejected_dir: Path,
        *,
        max_bytes: int = MAX_SPEC_BYTES,
        settle_s: float = 0.3,
        clock: Callable[[], float] = time.time,
        check_spec: Callable[[JobSpec], list[str]] | None = None,
        preflight: Callable[[JobSpec], list[str]] | None = None,
        guard: Callable[[], None] | None = None,
    ) -> None:
        """`check_spec`: more problems to refuse a spec for, each a line for the user (the composition root
        passes the rules loader, so a spec whose rules files do not load is rejected with their lines).
        `preflight` (supervisor/preflight, built in compose) then checks a spec that passed against the
        cluster before it is claimed; its problems reject the spec like spec errors. `guard` (the daemon's
        lease) is called before a spec is moved, and raises to refuse: a former leader thawed from a freeze
        never claims or rejects a spec the new leader is about to take."""
        self.guard = guard or (lambda: None)
        self.check_spec = check_spec
        self.preflight = preflight
        self.queue_dir = queue_dir
        self.runs_dir = runs_dir
        self.rejected_dir = rejected_dir
        self.max_bytes = max_bytes
        self.settle_s = settle_s
        self.clock = clock

    def scan(self) -> tuple[list[Claimed], list[Rejected]]:
        """Look at every settled file in the queue once."""
        claimed: list[Claimed] = []
        rejected: list[Rejected] = []
        try:
            entries = sorted(os.scandir(self.queue_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return claimed, rejected
        for entry in entries:
            if not is_candidate(entry.name):
                continue
            try:
                outcome = self._consider(Path(entry.path))
            except FileNotFoundError:
                continue  # taken by another daemon, or withdrawn by the user
            except OSError as exc:
                log.error("could not read queued spec", path=entry.path, error=str(exc))
                continue
            if isinstance(outcome, Claimed):
                claimed.append(outcome)
            elif isinstance(outcome, Rejected):
                rejected.append(outcome)
        return claimed, rejected

    def _consider(self, path: Path) -> Claimed | Rejected | None:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            return self._reject(path, ["the spec is a symbolic link; copy the file into the queue instead"])
        if not stat.S_ISREG(st.st_mode):
            return self._reject(path, ["not a regular file"])
        if self.clock() - st.st_mtime < self.settle_s:
            return None  # still being written
        if st.st_uid != os.getuid():
            return self._reject(path, [f"owned by uid {st.st_uid}, but the daemon runs as uid {os.getuid()}"])
        if st.st_size > self.max_bytes:
            return self._reject(path, [f"too large: {st.st_size} bytes (limit {self.max_bytes})"])
        if st.st_size == 0:
            return self._reject(path, ["empty file"])
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return self._reject(path, [f"not UTF-8 text (byte {exc.start})"])
        try:
            spec = load_spec(path, text)
        except YamlDocumentError as exc:
            return self._reject(path, [str(e) for e in exc.errors])
        problems = check_spec_files(spec)
        if not problems and self.check_spec is not None:
            problems = self.check_spec(spec)
        if not problems and self.preflight is not None:
            problems = self.preflight(spec)
        if not problems and spec.pass_env:
            problems = pass_env_problems(path, spec.pass_env)
        if problems:
            return self._reject(path, [f"{path}: {p}" for p in problems])
        return self._claim(path, spec)

    def _claim(self, path: Path, spec: JobSpec) -> Claimed | None:
        # `shepherd submit` names the file after the run id it printed; keep that id.
        run_id = path.stem if RUN_ID_RE.fullmatch(path.stem) and path.stem.startswith(spec.name[:40]) else ""
        if not run_id or (self.runs_dir / run_id).exists():
            run_id = new_run_id(spec.name, self.clock())
        self.guard()
        run_dir = self.runs_dir / run_id
        run_dir.mkdir(parents=True)
        target = run_dir / "spec.yaml"
        try:
            kept = take_pass_env(path, run_dir) if spec.pass_env else None
        except FileNotFoundError:  # gone since it was checked: the next scan rejects the spec, saying why
            run_dir.rmdir()
            return None
        try:
            os.rename(path, target)  # atomic: exactly one claimant wins
        except FileNotFoundError:
            if kept is not None:
                kept.unlink(missing_ok=True)
            run_dir.rmdir()
            return None
        log.info("spec claimed", run_id=run_id, source=path.name)
        return Claimed(run_id, spec, target)

    def _reject(self, path: Path, errors: list[str]) -> Rejected | None:
        self.rejected_dir.mkdir(parents=True, exist_ok=True)
        target = self.rejected_dir / path.name
        if target.exists() or target.is_symlink():
            target = (
                self.rejected_dir / f"{path.stem}-{int(self.clock())}-{secrets.token_hex(2)}{path.suffix}"
            )
        self.guard()
        pass_env_sidecar(path).unlink(missing_ok=True)  # secrets are not kept for a spec that never runs
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return None
        run_id = submitted_run_id(path)
        rejected = Rejected(path, target, errors, run_id=run_id, at=self.clock())
        of_run = f" (run {run_id})" if run_id else ""
        rejected.error_file.write_text(
            f"shepherd rejected {path.name}{of_run} at intake:\n" + "".join(f"  - {e}\n" for e in errors),
            encoding="utf-8",
        )
        record = {
            "run_id": run_id,
            "source": str(path),
            "moved_to": str(target),
            "errors": errors,
            "at": rejected.at,
        }
        rejected.record_file.write_text(json.dumps(record, indent=1), encoding="utf-8")
        log.error("spec rejected", source=path.name, run_id=run_id, moved_to=str(target), errors=errors)
        return rejected
