"""`resume RUN --set KEY=VALUE`: the run's spec changes from the next attempt on, who changed what is in its
history, a rule's earlier fix to the same key gives way, and a secret is never taken."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from supervisor.act.control import Controller
from supervisor.act.mailbox import Request, request_sets
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunState
from supervisor.ports import ControlError
from supervisor.slurm.submit import build_submit_request
from supervisor.store import Store

RUN = "grpo-20261127-000000-abcd"
SPEC = {
    "name": "grpo",
    "command": ["python", "run_grpo.py", "grpo.max_num_steps=6"],
    "slurm": {"time": "04:00:00"},
    "pass_env": ["WANDB_API_KEY"],
}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "state.db")
    (tmp_path / "runs" / RUN).mkdir(parents=True)
    s.create_run(RUN, "grpo", json.dumps(SPEC), str(tmp_path / "runs" / RUN / "spec.yaml"))
    return s


def resume(store: Store, *sets: str, actor: str = "cli:alice", state: RunState = RunState.FAILED) -> str:
    store.set_run_state(RUN, state, reason="stopped")
    controller = Controller(store, slurm=None)  # type: ignore[arg-type]
    return anyio.run(lambda: controller.resume(RUN, "latest", actor, sets))


def test_a_set_changes_the_spec_the_next_attempts_are_built_from(store: Store) -> None:
    said = resume(store, "command+=policy.train_micro_batch_size=1", "slurm.time=02:00:00")
    run = store.get_run(RUN)
    assert run is not None and run.state == RunState.BACKOFF
    assert run.spec.command == [
        "python",
        "run_grpo.py",
        "grpo.max_num_steps=6",
        "policy.train_micro_batch_size=1",
    ]
    assert run.spec.slurm.time == "02:00:00"
    assert (
        "changed: command+policy.train_micro_batch_size: (unset) -> policy.train_micro_batch_size=1" in said
    )


def test_history_says_who_changed_what(store: Store) -> None:
    resume(store, "slurm.time=02:00:00", actor="cli:alice")
    (event,) = [e for e in store.events(RUN) if e.kind == "spec-changed"]
    assert event.message == "slurm.time: 04:00:00 -> 02:00:00 (set by cli:alice)"
    assert event.data == {"actor": "cli:alice", "key": "slurm.time", "old": "04:00:00", "new": "02:00:00"}


def test_a_rule_fix_to_the_same_key_gives_way_and_the_others_stay(store: Store) -> None:
    fix = AttemptOverrides(env={"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1"}, reason="nccl-timeout: ...")
    store.set_run_state(RUN, RunState.FAILED, next_attempt=fix.to_dict())
    resume(store, "env.NCCL_DEBUG=WARN")
    run = store.get_run(RUN)
    assert run is not None
    assert run.spec.env == {"NCCL_DEBUG": "WARN"}
    assert AttemptOverrides.from_dict(run.next_attempt).env == {"NCCL_P2P_DISABLE": "1"}


def test_a_bad_key_changes_nothing_and_says_where(store: Store) -> None:
    with pytest.raises(ControlError, match=r"resume\.max_attemps: unknown key .*did you mean `max_attempts`"):
        resume(store, "resume.max_attemps=3")
    run = store.get_run(RUN)
    assert run is not None and run.state == RunState.FAILED and run.spec.resume.max_attempts == 4
    assert not [e for e in store.events(RUN) if e.kind == "spec-changed"]


def test_a_passed_secret_name_is_refused_and_its_value_never_recorded(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ControlError, match="WANDB_API_KEY: a secret variable") as exc:
        resume(store, "env.WANDB_API_KEY=abcdef123456")
    assert "abcdef123456" not in str(exc.value)
    assert not any("abcdef123456" in e.message for e in store.events(RUN))


def test_a_value_from_the_runs_kept_pass_env_is_refused_anywhere(store: Store, tmp_path: Path) -> None:
    kept = tmp_path / "runs" / RUN / "pass_env.env"
    kept.write_text("WANDB_API_KEY=s3cr3t-wandb-key\n")
    kept.chmod(0o600)
    with pytest.raises(ControlError, match="carries a secret value") as exc:
        resume(store, "command+=logger.wandb.name=s3cr3t-wandb-key")
    assert "s3cr3t-wandb-key" not in str(exc.value)


def test_a_completed_run_is_resumed_only_with_a_change(store: Store) -> None:
    with pytest.raises(ControlError, match="completed"):
        resume(store, state=RunState.COMPLETED)
    resume(store, "command+=grpo.max_num_steps=8", state=RunState.COMPLETED)
    run = store.get_run(RUN)
    assert run is not None and "grpo.max_num_steps=8" in run.spec.command


def test_a_slack_set_is_located_at_set_not_at_the_cli_flag(store: Store) -> None:
    with pytest.raises(ControlError, match=r"^nothing changed.*\nset: slurm.nodes:"):
        resume(store, "slurm.nodes=0", actor="U0ALICE")


def test_the_sets_travel_to_the_lease_holder_as_one_json_text() -> None:
    req = Request.new("resume", {"run": RUN, "sets": json.dumps(["a=1", "b=2"])}, "cli:alice", 5, "h:1")
    assert request_sets(req) == ["a=1", "b=2"]
    with pytest.raises(ValueError, match="JSON list"):
        request_sets(Request.new("resume", {"run": RUN, "sets": '{"a": 1}'}, "cli:alice", 5, "h:1"))


def test_the_next_request_runs_the_persons_value_and_a_later_rule_fix_wins_again(
    store: Store, tmp_path: Path
) -> None:
    rule_fix = AttemptOverrides(sbatch_args=("--time=01:00:00",), reason="timeout: raised")
    store.set_run_state(RUN, RunState.FAILED, next_attempt=rule_fix.to_dict())
    resume(store, "slurm.time=02:00:00", "command+=grpo.max_num_steps=8")
    run = store.get_run(RUN)
    assert run is not None

    def times(overrides: AttemptOverrides) -> list[str]:
        req = build_submit_request(
            run.spec, run_id=RUN, attempt=2, run_dir=tmp_path, overrides=overrides, environ={}
        )
        assert req.script_args[-1] == "grpo.max_num_steps=8"
        return [o for o in req.options if o.startswith("--time=")]

    after_set = AttemptOverrides.from_dict(run.next_attempt)
    assert times(after_set) == ["--time=02:00:00"]
    later_fix = AttemptOverrides(sbatch_args=(*after_set.sbatch_args, "--time=03:00:00"))
    assert times(later_fix)[-1] == "--time=03:00:00"  # sbatch takes the last: the rule's
