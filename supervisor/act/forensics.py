"""Before a hung job is cancelled, take what explains the hang from every one of its nodes (each process's
Python stacks, nvidia-smi, `ray status`, the tail of each log) and keep it under the run's folder, because the
cancel kills the only witnesses. Bounded in time per node, all nodes at once: a node that does not answer is
named in the summary, and the decision goes ahead anyway.

`JobForensics` is the real collector (nodes through `NodeRunner`: srun --overlap in the job); the summary is
decide/stacks.py's. Tests drive `Forensics` with an in-memory fake and `NodeRunner` with a scripted one.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog

from supervisor.act import forensics_probe
from supervisor.decide.stacks import (
    ProcStacks,
    StackSummary,
    from_faulthandler,
    from_pyspy,
    process_name,
    render,
    summarise,
)
from supervisor.domain.runs import AttemptRow, RunRow
from supervisor.redact import mask_known, mask_known_in
from supervisor.slurm.launchers import layout
from supervisor.slurm.submit import base_log_dir

log = structlog.get_logger(__name__)

FORENSICS_DIR = "forensics"
SUMMARY_JSON = "summary.json"
SUMMARY_TXT = "summary.txt"
STACKS_TXT = "stacks.txt"
TAILS_TXT = "log-tails.txt"
TAIL_BYTES = 16 * 1024
PROBE_SOURCE = Path(forensics_probe.__file__).read_text()


class Forensics(Protocol):
    """What acting on a hang asks before the cancel: the evidence, stored, and its summary (None: nothing)."""

    async def capture(
        self, run: RunRow, attempt: AttemptRow, reason: str, *, timeout_s: float | None = None
    ) -> StackSummary | None: ...


class NodeRunner(Protocol):
    """A job's nodes and a command run on one of them inside the job (SlurmClient: scontrol, srun)."""

    async def job_nodes(self, job_id: str) -> str: ...

    async def hostnames(self, nodelist: str) -> list[str]: ...

    async def run_in_job(
        self, job_id: str, node: str, argv: list[str], *, timeout_s: float
    ) -> subprocess.CompletedProcess[bytes]: ...


def forensics_dir(runs_dir: Path, run_id: str, attempt: int) -> Path:
    """Where one attempt's forensics live (the one owner of this layout: the CLI reads it from here)."""
    return runs_dir / run_id / FORENSICS_DIR / f"attempt-{attempt}"


def latest_forensics(runs_dir: Path, run_id: str) -> Path | None:
    """The newest attempt's forensics folder with a summary, if any."""
    root = runs_dir / run_id / FORENSICS_DIR
    found = [d for d in root.glob("attempt-*") if (d / SUMMARY_JSON).is_file()] if root.is_dir() else []
    return max(
        found, key=lambda d: int(d.name.split("-", 1)[1]) if d.name[8:].isdigit() else -1, default=None
    )


@dataclass
class JobForensics:
    """The real collector: the probe (act/forensics_probe.py) on every node of the job through srun."""

    nodes: NodeRunner
    runs_dir: Path
    timeout_s: float = 30.0
    python: str = "python3"
    grace_s: float = 5.0  # beyond a node's own timeout, before the collector stops waiting for its runner

    async def capture(
        self, run: RunRow, attempt: AttemptRow, reason: str, *, timeout_s: float | None = None
    ) -> StackSummary | None:
        """Every node's answer within `timeout_s` (the collector's own, unless given), kept and summarised."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        job = attempt.live_job or attempt.job_id
        if not job:
            return None
        out = forensics_dir(self.runs_dir, run.id, attempt.n)
        out.mkdir(parents=True, exist_ok=True)
        notes: list[str] = []
        names: list[str] = []
        try:
            with anyio.fail_after(limit):
                names = await self.nodes.hostnames(await self.nodes.job_nodes(job))
        except Exception as exc:  # Slurm's own error, a timeout: the evidence is what it is
            notes.append(f"the job's nodes are unknown: {exc}")
        answers: dict[str, dict[str, Any]] = {}
        unanswered: list[str] = []

        async def one(node: str) -> None:
            # the probe bounds each of its commands; this bounds the node as a whole (srun itself may hang)
            per_cmd = max(1.0, limit / 3)
            argv = [self.python, "-c", PROBE_SOURCE, job, f"{per_cmd:g}"]
            try:
                # srun is killed after timeout_s; the grace covers a runner that would not come back at all
                with anyio.fail_after(limit + self.grace_s):
                    proc = await self.nodes.run_in_job(job, node, argv, timeout_s=limit)
                answer = json.loads(proc.stdout.decode(errors="replace") or "{}")
                answers[node] = answer if isinstance(answer, dict) else {}
                if proc.returncode != 0:
                    err = proc.stderr[-300:].decode(errors="replace")
                    notes.append(f"{node}: probe exited {proc.returncode}: {err}")
            except TimeoutError:
                unanswered.append(node)
                notes.append(f"{node}: did not answer within {limit + self.grace_s:g}s")
            except Exception as exc:  # srun refused, the node is down: the other nodes still count
                unanswered.append(node)
                notes.append(f"{node}: {exc}")

        async with anyio.create_task_group() as tg:
            for node in names:
                tg.start_soon(one, node)
        procs = [p for node, ans in sorted(answers.items()) for p in _procs(node, ans)]
        summary = summarise(procs, sorted(unanswered))
        if notes:
            summary = _with_notes(summary, notes)
        self._store(out, run, attempt, reason, answers, procs, summary)
        log.info("forensics taken", run_id=run.id, attempt=attempt.n, summary=summary.headline())
        return summary

    def _store(
        self,
        out: Path,
        run: RunRow,
        attempt: AttemptRow,
        reason: str,
        answers: dict[str, dict[str, Any]],
        procs: list[ProcStacks],
        summary: StackSummary,
    ) -> None:
        # What a job's processes and logs show can hold its secrets (env_files, pass_env): kept masked.
        reason = mask_known(reason)
        for node, ans in answers.items():
            (out / f"node-{_safe(node)}.json").write_text(json.dumps(mask_known_in(ans), indent=1))
            extra = [
                f"== {k} ({node})\n{ans[k]}" for k in ("nvidia_smi", "ray_status", "ray_actors") if ans.get(k)
            ]
            if extra:
                (out / f"node-{_safe(node)}.txt").write_text(mask_known("\n\n".join(extra) + "\n"))
        (out / STACKS_TXT).write_text(mask_known("\n\n".join(render(p) for p in procs) + "\n"))
        (out / TAILS_TXT).write_text(mask_known(_tails(run, attempt, self.runs_dir)))
        summary_dict = mask_known_in(summary.to_dict())
        (out / SUMMARY_JSON).write_text(json.dumps({"reason": reason, **summary_dict}, indent=1))
        (out / SUMMARY_TXT).write_text(mask_known(f"{reason}\n{summary.text()}\n"))


def _procs(node: str, ans: dict[str, Any]) -> list[ProcStacks]:
    out = []
    for p in ans.get("processes") or []:
        if not isinstance(p, dict):
            continue
        method = str(p.get("method") or "none")
        threads = (
            from_pyspy(p.get("threads"))
            if method == "py-spy"
            else from_faulthandler(str(p.get("text") or ""))
            if method == "faulthandler"
            else ()
        )
        cmd = [str(c) for c in p.get("cmdline") or []]
        error = str(p.get("error") or "")
        if method == "faulthandler" and p.get("why"):
            error = f"py-spy refused ({p['why']}); the trainer's faulthandler dump instead"
        node_name = str(ans.get("node") or node)
        pid = int(p["pid"]) if isinstance(p.get("pid"), int) else 0
        out.append(ProcStacks(node_name, pid, process_name(cmd), method, threads, error))
    return out


def _with_notes(s: StackSummary, notes: list[str]) -> StackSummary:
    return replace(s, notes=(*s.notes, *notes[:20]))


def _tails(run: RunRow, attempt: AttemptRow, runs_dir: Path) -> str:
    """The last bytes of each of the attempt's logs (read here: they are on the shared filesystem)."""
    if not attempt.job_id:
        return ""
    base = base_log_dir(run.spec, runs_dir / run.id)
    parts = []
    for f in layout.log_files(base, attempt.job_id):
        try:
            with f.open("rb") as fh:
                size = fh.seek(0, 2)
                fh.seek(max(0, size - TAIL_BYTES))
                parts.append(
                    f"== {f} (last {min(size, TAIL_BYTES)} of {size} bytes)\n"
                    + fh.read().decode(errors="replace")
                )
        except OSError:
            continue
    return "\n\n".join(parts) + "\n"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64] or "node"
