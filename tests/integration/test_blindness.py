"""Never mistake "unknown" for "failed": regression tests for the anchors' bugs, on the real dev cluster.

The daemon runs in-process with its real Slurm client, wrapped so that chosen calls fail the way an
overloaded or partitioned controller fails (SlurmUnavailable after a timeout); sbatch is never faked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.daemon.compose import build
from supervisor.domain.jobstate import JobState
from supervisor.domain.runs import RunState
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SlurmUnavailable
from supervisor.slurm.parse import JobObservation

pytestmark = pytest.mark.slurm


class FlakySlurm(SlurmClient):
    """The real client, but squeue/sacct fail while `blind` is set or `fail_next` is positive."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.blind = False
        self.fail_next = 0
        self.failures = 0

    def _maybe_fail(self) -> None:
        if self.blind or self.fail_next > 0:
            self.fail_next = max(0, self.fail_next - 1)
            self.failures += 1
            raise SlurmUnavailable("squeue exited 1: slurm_load_jobs error: Socket timed out on send/recv")

    async def squeue(self) -> list[JobObservation]:
        self._maybe_fail()
        return await super().squeue()

    async def sacct(self, job_ids: Any = (), names: Any = ()) -> list[JobObservation]:
        self._maybe_fail()
        return await super().sacct(job_ids, names)


# ray.sub's log layout without Ray: these jobs' subject is Slurm going blind, and a real Ray here would be one
# more Ray user on the host, which NeMo RL's ray.sub (`ray stop`, in tests beside this one) kills.
PLAIN = Path(__file__).resolve().parents[1] / "support" / "plain.sub"


def settings(tmp: Path) -> Settings:
    s = Settings(root=tmp / "root", launch_script=PLAIN)
    s.slurm.poll_interval_s = 0.2
    s.slurm.steady_poll_interval_s = 0.2
    s.slurm.idle_poll_interval_s = 0.2
    s.slurm.unknown_grace_s = 5
    return s


def spec(tmp: Path, seconds: int) -> Path:
    p = tmp / "job.yaml"
    p.write_text(f"name: healthy\ncommand: ['sleep', '{seconds}']\nworkdir: {tmp}\nslurm: {{cpus: 1}}\n")
    return p


async def _run(tmp: Path, scenario: Any) -> Any:
    s = settings(tmp)
    built = build(s)
    flaky = FlakySlurm(timeout_s=15)
    built.daemon.slurm = flaky
    (s.root / "queue").mkdir(parents=True, exist_ok=True)
    spec_path = spec(tmp, 6)
    (s.queue_dir / "healthy.yaml").write_bytes(spec_path.read_bytes())
    async with anyio.create_task_group() as tg:
        tg.start_soon(built.run)
        result = await scenario(built, flaky)
        tg.cancel_scope.cancel()
    return built, result


async def wait_until(pred: Any, within: float = 60) -> None:
    with anyio.fail_after(within):
        while not pred():  # noqa: ASYNC110 - polling the store, which has no event to wait on
            await anyio.sleep(0.1)


def the_run(built: Any) -> Any:
    runs = built.daemon.store.list_runs()
    return runs[0] if runs else None


def test_25_transient_squeue_failures_during_a_healthy_job_cause_no_resume(tmp_path: Path) -> None:
    """SkyPilot #10155: a run of status-fetch timeouts caused needless recoveries of a healthy job."""

    async def scenario(built: Any, flaky: FlakySlurm) -> None:
        await wait_until(lambda: (r := the_run(built)) is not None and r.state == RunState.RUNNING)
        flaky.fail_next = 25
        await wait_until(lambda: flaky.fail_next == 0)
        await wait_until(lambda: the_run(built).state.is_final, within=90)

    built, _ = anyio.run(_run, tmp_path, scenario)
    run = the_run(built)
    store = built.daemon.store
    assert run.state == RunState.COMPLETED
    assert len(store.attempts(run.id)) == 1
    assert [d for d in store.decisions(run.id) if "resume" in d.action] == []


def test_a_job_that_completed_while_the_daemon_was_partitioned_is_never_restarted(tmp_path: Path) -> None:
    """SkyPilot #6133: after a partition, a job that had already SUCCEEDED was restarted."""

    async def scenario(built: Any, flaky: FlakySlurm) -> list[str]:
        await wait_until(lambda: (r := the_run(built)) is not None and r.state == RunState.RUNNING)
        flaky.blind = True
        seen: list[str] = []
        for _ in range(120):  # the job finishes while we cannot see Slurm
            seen.append(the_run(built).state.value)
            await anyio.sleep(0.1)
        assert built.daemon.blind_since is not None
        flaky.blind = False
        await wait_until(lambda: the_run(built).state.is_final, within=60)
        return seen

    built, seen = anyio.run(_run, tmp_path, scenario)
    run = the_run(built)
    store = built.daemon.store
    assert set(seen) == {"RUNNING"}  # blind is not failed
    assert run.state == RunState.COMPLETED
    attempts = store.attempts(run.id)
    assert len(attempts) == 1 and attempts[0].slurm_state == JobState.COMPLETED.value
