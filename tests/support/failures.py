"""A run's history of failed attempts written into a store the way the daemon writes it: each attempt runs an
hour of 10-s steps and ends FAILED after a rule's resume decision (for the checkpoint interval's MTBF)."""

from __future__ import annotations

from supervisor.store import Store

HOUR = 3600.0
STEP_S = 10.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def failed_hours(store: Store, clock: Clock, run_id: str, attempts: int, running_s: float = HOUR) -> None:
    """`attempts` attempts of `run_id`, each failing after `running_s` (an hour) of running."""
    for n in range(1, attempts + 1):
        store.begin_attempt(run_id, lambda n: f"{run_id}-a{n}", {"ckpt_step_at_submit": None})
        store.attempt_submitted(run_id, n, str(100 + n))
        store.observe_attempt(run_id, n, slurm_state="RUNNING", reason=None, nodes="n1", started=True)
        start = clock.now
        for s in range(1, 20):
            store.record_step(run_id, n, s, start + STEP_S * s)
        clock.now = start + running_s
        decision = store.record_decision(
            run_id,
            n,
            rule="nccl-error",
            action="resume",
            signature="nccl:x",
            reason="NCCL timeout",
            evidence={"seen_at": clock.now, "policy": {"category": "failure"}},
        )
        assert decision is not None
        store.set_decision_outcome(
            decision, f"resuming as attempt {n + 1}"
        )  # carried out, as the daemon does
        store.observe_attempt(
            run_id, n, slurm_state="FAILED", reason=None, nodes="n1", exit_code=1, ended=True
        )
