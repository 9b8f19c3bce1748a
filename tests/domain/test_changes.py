"""A person's `--set KEY=VALUE` between attempts: applied to the run's spec, validated like a spec file, and
never a way in for a secret."""

import json

import pytest

from supervisor.domain.changes import SpecChange, apply_changes, clear_fixes, override_key
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.domain.yamlpos import YamlDocumentError

SPEC = JobSpec.model_validate(
    {
        "name": "grpo",
        "command": ["python", "run_grpo.py", "grpo.max_num_steps=6", "++policy.lr=1e-6"],
        "slurm": {"time": "04:00:00"},
        "env": {"NCCL_DEBUG": "WARN"},
        "pass_env": ["WANDB_API_KEY"],
    }
)


def refusals(sets: list[str], **kw: object) -> list[str]:
    with pytest.raises(YamlDocumentError) as exc:
        apply_changes(SPEC, sets, **kw)  # type: ignore[arg-type]
    return [str(e) for e in exc.value.errors]


def test_a_spec_field_is_set_with_its_value_read_as_yaml() -> None:
    new, changes = apply_changes(SPEC, ["slurm.time=02:00:00", "resume.max_attempts=6"])
    assert new.slurm.time == "02:00:00"
    assert new.resume.max_attempts == 6
    assert changes == [
        SpecChange("slurm.time", "04:00:00", "02:00:00"),
        SpecChange("resume.max_attempts", 4, 6),
    ]
    assert changes[0].describe() == "slurm.time: 04:00:00 -> 02:00:00"


def test_a_command_override_replaces_the_one_with_the_same_key() -> None:
    new, changes = apply_changes(SPEC, ["command+=grpo.max_num_steps=8", "command+=policy.lr=2e-6"])
    assert new.command == ["python", "run_grpo.py", "grpo.max_num_steps=8", "policy.lr=2e-6"]
    assert changes[0] == SpecChange(
        "command+grpo.max_num_steps", "grpo.max_num_steps=6", "grpo.max_num_steps=8"
    )


def test_a_new_command_override_is_appended_and_one_can_be_dropped() -> None:
    new, _ = apply_changes(SPEC, ["command+=policy.train_micro_batch_size=1", "command-=grpo.max_num_steps"])
    assert new.command == ["python", "run_grpo.py", "++policy.lr=1e-6", "policy.train_micro_batch_size=1"]


def test_a_string_command_gets_its_override_as_one_shell_word() -> None:
    spec = SPEC.model_copy(update={"command": "uv run run_grpo.py grpo.max_num_steps=6 --x"})
    new, _ = apply_changes(spec, ["command+=grpo.max_num_steps=8", "command+=logger.name=a b"])
    assert new.command == "uv run run_grpo.py grpo.max_num_steps=8 --x 'logger.name=a b'"


def test_an_unknown_key_is_refused_with_the_near_miss() -> None:
    assert refusals(["resume.max_attemps=3"]) == [
        "--set: resume.max_attemps: unknown key (not allowed here); did you mean `max_attempts`?"
    ]


def test_a_bad_value_is_refused_by_the_spec_model() -> None:
    (err,) = refusals(["slurm.time=soon"])
    assert err.startswith("--set: slurm.time: ") and "Slurm time" in err


def test_every_bad_change_is_refused_together_and_nothing_applies() -> None:
    assert len(refusals(["slurm.nodes=0", "nonsense", "name=other"])) == 3


def test_a_secret_variable_is_never_taken() -> None:
    errs = refusals(
        ["env.HF_TOKEN=hf_abcdefgh", "env.WANDB_API_KEY=x", "env.FROM_FILE=y", "command+=wandb.api_key=z"],
        secret_names={"FROM_FILE"},
    )
    assert len(errs) == 4
    assert all("secret" in e for e in errs)
    assert not any(v in e for e in errs for v in ("hf_abcdefgh", "=x", "=y", "=z"))


def test_a_change_carrying_a_secret_value_is_refused_without_echoing_it() -> None:
    (err,) = refusals(["command+=logger.name=s3cr3tvalue"], secret_values={"s3cr3tvalue"})
    assert "s3cr3tvalue" not in err and "secret" in err


def test_the_secret_sources_are_fixed() -> None:
    assert "fixed" in refusals(["pass_env=[A]"])[0]
    assert "fixed" in refusals(["env_files=[/x]"])[0]


def test_a_plain_variable_is_set_as_text_and_unset_by_an_empty_value() -> None:
    new, _ = apply_changes(SPEC, ["env.CUDA_LAUNCH_BLOCKING=1", "env.NCCL_DEBUG="])
    assert new.env == {"CUDA_LAUNCH_BLOCKING": "1"}


def test_a_person_setting_a_key_drops_the_rule_fix_to_it_and_keeps_the_others() -> None:
    fixed = AttemptOverrides(
        env={"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1"}, sbatch_args=("--time=01:00:00", "--mem=8G")
    )
    _, changes = apply_changes(SPEC, ["env.NCCL_DEBUG=TRACE", "slurm.time=02:00:00"])
    left = clear_fixes(fixed, changes)
    assert left.env == {"NCCL_P2P_DISABLE": "1"}
    assert left.sbatch_args == ("--mem=8G",)


def test_override_keys() -> None:
    assert override_key("++policy.lr=1") == "policy.lr"
    assert override_key("~logger.wandb") == "logger.wandb"
    assert override_key("--config") is None


def test_a_slurm_time_stays_text_where_yaml_would_read_a_number() -> None:
    new, _ = apply_changes(SPEC, ["slurm.time=4:00:00", "resume.backoff_s=1e2"])
    assert new.slurm.time == "4:00:00"
    assert new.resume.backoff_s == 100.0


def test_the_change_log_shows_a_persons_set_and_a_rules_later_fix_in_order() -> None:
    from supervisor.domain.changes import change_log
    from supervisor.domain.runs import AttemptRow, AttemptState, HistoryEntry

    def attempt(n: int, at: float, o: AttemptOverrides) -> AttemptRow:
        fields = dict.fromkeys(AttemptRow.__dataclass_fields__)
        fields.update(run_id="r", n=n, tag="t", state=AttemptState.ENDED, intent_at=at)
        fields.update(overrides_json=json.dumps(o.to_dict()))
        return AttemptRow(**fields)  # type: ignore[arg-type]

    set_by_alice = HistoryEntry(
        1,
        "r",
        None,
        15.0,
        "spec-changed",
        "env.NCCL_DEBUG: INFO -> WARN (set by cli:alice)",
        {"actor": "cli:alice"},
    )
    attempts = [
        attempt(1, 0.0, AttemptOverrides()),
        attempt(2, 10.0, AttemptOverrides(env={"NCCL_DEBUG": "INFO"}, reason="nccl-timeout: x")),
        attempt(3, 20.0, AttemptOverrides(resumed_by="cli:alice")),
        attempt(4, 30.0, AttemptOverrides(env={"NCCL_DEBUG": "INFO"}, reason="nccl-timeout: y")),
    ]
    assert [(c["by"], c["what"]) for c in change_log([set_by_alice], attempts)] == [
        ("rule nccl-timeout", "env NCCL_DEBUG=INFO"),
        ("cli:alice", "env.NCCL_DEBUG: INFO -> WARN"),
        ("rule nccl-timeout", "env NCCL_DEBUG=INFO"),
    ]
