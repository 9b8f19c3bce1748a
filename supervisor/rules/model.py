"""The schema of a rules file (``rules/*.yaml``).

Everything is validated up front, with unknown keys refused, because a rule
that silently never fires (a typo in a key, a regex that does not compile) is
worse than a rules file that is refused at load time with its line number.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from supervisor.domain.jobstate import JobState
from supervisor.rules.regex import check_regex
from supervisor.rules.rhythm import MAX_SAMPLES, Learning

RULE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_DURATION_RE = re.compile(
    r"^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$"
)
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")

# Placeholders an env patch may use; `spec.*` is resolved from the run's spec by the daemon.
ENV_PLACEHOLDERS = frozenset({"run", "attempt", "job_id", "node", "rule"})
# Placeholders an alert message may use.
MESSAGE_PLACEHOLDERS = frozenset(
    {
        "run",
        "rule",
        "reason",
        "excerpt",
        "attempt",
        "job_id",
        "node",
        "state",
        "description",
        "signature",
        "metric",
        "step",
        "history",
        "best_checkpoint",
    }
)


def parse_duration(value: str | int | float) -> float:
    """``30m``, ``1h30m``, ``90s``, ``2d`` or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30m, 2h or 90s")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration must not be negative")
        return float(value)
    text = value.strip().replace(" ", "")
    m = _DURATION_RE.fullmatch(text)
    if not text or m is None or not any(m.groups()):
        raise ValueError(f"{value!r} is not a duration like 30m, 2h, 1h30m or 90s")
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s


def template_fields(template: str) -> list[str]:
    """The ``{placeholder}`` names used in a template."""
    return _PLACEHOLDER_RE.findall(template)


class MissingPlaceholder(KeyError):
    """A template names a value the context does not have (e.g. the spec has no shared_cache_dir)."""


def render_template(template: str, context: dict[str, str]) -> str:
    """Fill ``{name}`` / ``{spec.field}`` placeholders; unknown ones raise so a fix is never half-applied."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in context:
            raise MissingPlaceholder(key)
        return context[key]

    return _PLACEHOLDER_RE.sub(sub, template)


def _check_regex(value: str) -> str:
    """Every rule regex must compile in RE2 (linear time); the reason says what to change if not."""
    return check_regex(value)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------- triggers


class Defer(_Strict):
    """A launcher that retries its own Ray bring-up is let retry (NeMo RL's ray.sub starts the head 3 times,
    each worker up to 20). While ``until_file`` is absent from the attempt's log dir (``ray-driver.log``: the
    driver has not started), a match in ``sources`` decides nothing: it is held, and the rule's other
    triggers decide (the launcher's give-up, the bring-up stall). Held, it becomes the decision only if the
    job then ends FAILED; once ``until_file`` exists the trigger acts at once."""

    until_file: str
    sources: list[str] = Field(
        default_factory=list, description="file-name globs where the launcher retries; empty: every source"
    )

    @field_validator("until_file")
    @classmethod
    def _relative(cls, v: str) -> str:
        if not v or v.startswith("/") or ".." in v.split("/"):
            raise ValueError("must be a path relative to the attempt's log dir")
        return v


class LogTrigger(_Strict):
    """A regex over one log event (a line, or a whole traceback grouped into one event)."""

    kind: Literal["log"] = "log"
    regex: str
    exclude: str | None = Field(
        default=None, description="if this regex matches the line holding the match, the rule does not fire"
    )
    sources: list[str] = Field(default_factory=list, description="file-name globs; empty: every source")
    literals: list[str] | None = Field(
        default=None,
        description="prefilter: every match contains one of these; derived from the regex when omitted",
    )
    defer: Defer | None = Field(
        default=None, description="held, not decided, while the launcher still retries its bring-up"
    )

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str) -> str:
        return check_regex(v, may_match_empty=False)  # one that matches "" would fire on every line

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, v: str | None) -> str | None:
        return v if v is None else _check_regex(v)

    @field_validator("literals")
    @classmethod
    def _literals(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or any(not s for s in v)):
            raise ValueError("literals must be a non-empty list of non-empty strings")
        return v


class StateTrigger(_Strict):
    """A confirmed Slurm state (from squeue/sacct, or what slurmstepd wrote into the job's output file)."""

    kind: Literal["state"] = "state"
    states: list[JobState] = Field(min_length=1)
    exit_codes: list[int] | None = None
    reason: str | None = Field(default=None, description="regex on Slurm's reason text")

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str | None) -> str | None:
        return v if v is None else _check_regex(v)


class PendingTrigger(_Strict):
    """The job has been PENDING with a matching reason for at least ``for``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kind: Literal["pending"] = "pending"
    reason: str
    for_s: float = Field(alias="for")

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return _check_regex(v)

    @field_validator("for_s", mode="before")
    @classmethod
    def _for(cls, v: Any) -> float:
        return parse_duration(v)


class StalledLearning(_Strict):
    """How a `stalled` trigger learns the run's rhythm (rules/rhythm.py): a phase with `min_samples`
    samples stalls after ``max(k x its p99 silence, floor)`` without progress; before, after `for`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    k: float = Field(default=3.0, ge=1.0, le=1000.0, description="multiple of the phase's p99 silence")
    floor_s: float = Field(default=300.0, alias="floor", description="never stall sooner than this")
    min_samples: int = Field(
        default=5, ge=1, le=MAX_SAMPLES, description="samples of a phase before it counts"
    )
    quantile: float = Field(default=0.99, gt=0.5, le=1.0)

    @field_validator("floor_s", mode="before")
    @classmethod
    def _floor(cls, v: Any) -> float:
        return parse_duration(v)

    def learning(self) -> Learning:
        return Learning(k=self.k, floor_s=self.floor_s, min_samples=self.min_samples, quantile=self.quantile)


class StalledTrigger(_Strict):
    """No progress on any of ``keys`` for ``for`` while the job is RUNNING; with `learn`, the bound of the
    phase the run is in, learnt from its own progress, once it has enough history (`for` until then)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kind: Literal["stalled"] = "stalled"
    for_s: float = Field(alias="for")
    keys: list[str] = Field(default_factory=lambda: ["step", "rollouts", "status"], min_length=1)
    learn: StalledLearning | None = Field(
        default=None, description="learn each phase's rhythm (`true` for the defaults); off when absent"
    )

    @field_validator("for_s", mode="before")
    @classmethod
    def _for(cls, v: Any) -> float:
        return parse_duration(v)

    @field_validator("learn", mode="before")
    @classmethod
    def _learn(cls, v: Any) -> Any:
        if v is True:
            return {}
        if v is False:
            return None
        return v


class MissingTrigger(_Strict):
    """An expected file (relative to the attempt's log dir) is absent ``after`` the job started RUNNING."""

    kind: Literal["missing"] = "missing"
    file: str
    after_s: float = Field(alias="after")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("after_s", mode="before")
    @classmethod
    def _after(cls, v: Any) -> float:
        return parse_duration(v)

    @field_validator("file")
    @classmethod
    def _relative(cls, v: str) -> str:
        if not v or v.startswith("/") or ".." in v.split("/"):
            raise ValueError("must be a path relative to the attempt's log dir")
        return v


MetricCondition = Literal["nan", "<", ">", "drop_from_best", "below_fraction_of_best", "spike"]
MAX_METRIC_WINDOW = 50  # steps; matches the history the matcher keeps per tag (state.METRIC_HISTORY)


class MetricTrigger(_Strict):
    """A condition on a scalar over its recent steps (Shepherd's names, watch/metric_names.py).

    * ``nan``: the value is NaN or inf.
    * ``<`` / ``>``: the mean of the last ``window`` values is below / above ``threshold`` (with ``floor``:
      only once that mean's best, by ``higher_is_better``, has reached ``floor``).
    * ``drop_from_best``: that mean fell ``threshold`` (absolute) from its best.
    * ``below_fraction_of_best``: that mean is below ``threshold`` x its best (0 < threshold < 1); the best
      must reach ``floor`` first, so a run that never learned is not called collapsed.
    * ``spike``: the value exceeds ``threshold`` x the median of the ``window`` values before it, and
      ``floor``.

    Each holds for ``for_steps`` consecutive steps before the rule fires, and fires once per such stretch.
    """

    kind: Literal["metric"] = "metric"
    tag: str = Field(description="exact tag or a glob, e.g. train:reward")
    condition: MetricCondition
    threshold: float | None = None
    window: int = Field(default=1, ge=1, le=MAX_METRIC_WINDOW, description="steps averaged (spike: median)")
    for_steps: int = Field(default=1, ge=1, le=100_000, description="consecutive steps it must hold")
    floor: float | None = Field(default=None, description="spike: minimum value; else the best that arms it")
    higher_is_better: bool = True
    min_step: int = 0

    @model_validator(mode="after")
    def _threshold(self) -> MetricTrigger:
        if self.condition != "nan" and self.threshold is None:
            raise ValueError(f"condition {self.condition!r} needs a threshold")
        if self.condition == "drop_from_best" and self.threshold is not None and self.threshold <= 0:
            raise ValueError("drop_from_best needs a positive threshold")
        if self.condition == "below_fraction_of_best" and not (0 < (self.threshold or 0) < 1):
            raise ValueError("below_fraction_of_best needs a threshold in (0, 1): a fraction of the best")
        if self.condition == "spike" and (self.threshold or 0) <= 1:
            raise ValueError("spike needs a threshold above 1 (a multiple of the recent median)")
        return self


Trigger = Annotated[
    LogTrigger | StateTrigger | PendingTrigger | StalledTrigger | MissingTrigger | MetricTrigger,
    Field(discriminator="kind"),
]


class Conditions(_Strict):
    """Extra gates checked against the run's state when a trigger matched."""

    job_states: list[JobState] | None = None
    min_running_s: float | None = Field(default=None, alias="min_running")
    min_attempt: int | None = Field(default=None, ge=1)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("min_running_s", mode="before")
    @classmethod
    def _min(cls, v: Any) -> float | None:
        return v if v is None else parse_duration(v)


# ----------------------------------------------------------------------------- actions


class ResumeAction(_Strict):
    """Resubmit the run (cancelling the job first if it still runs, unless `let_job_finish`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: str = Field(default="latest", alias="from", pattern=r"^(latest|best|step_\d+)$")
    env: dict[str, str] = Field(default_factory=dict)
    mounts: list[str] = Field(
        default_factory=list, description="container mounts added for the next attempts (src:dst)"
    )
    sbatch_args: list[str] = Field(default_factory=list)
    exclude_node: bool = False
    let_job_finish: bool = Field(
        default=False, description="the job is ending by itself: wait for it instead of cancelling it"
    )

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, v: list[str]) -> list[str]:
        for mount in v:
            for name in template_fields(mount):
                if not name.startswith("spec."):
                    raise ValueError(f"{mount}: unknown placeholder {{{name}}} (use spec.<field>)")
        return v

    before_divergence: bool = Field(
        default=False,
        description="skip checkpoints saved at or after the step the match saw (a metric that went bad)",
    )

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            for name in template_fields(value):
                if not (name in ENV_PLACEHOLDERS or name.startswith("spec.")):
                    raise ValueError(
                        f"{key}: unknown placeholder {{{name}}} (use spec.<field>, "
                        f"{', '.join(sorted(ENV_PLACEHOLDERS))})"
                    )
        return v

    @field_validator("sbatch_args")
    @classmethod
    def _args(cls, v: list[str]) -> list[str]:
        for arg in v:
            if not arg.startswith("-"):
                raise ValueError(f"{arg!r}: each sbatch arg must be one option like --constraint=a100")
        return v


class AlertAction(_Strict):
    level: Literal["debug", "info", "warning", "error"] = "warning"
    message: str = "{run}: {rule}: {reason}"

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        for name in template_fields(v):
            if name not in MESSAGE_PLACEHOLDERS:
                raise ValueError(
                    f"unknown placeholder {{{name}}} (use {', '.join(sorted(MESSAGE_PLACEHOLDERS))})"
                )
        return v


class CancelAction(_Strict):
    pass


class HoldAction(_Strict):
    pass


class GiveUpAction(_Strict):
    reason: str | None = None


ActionKind = Literal["resume", "alert", "cancel", "hold", "give_up"]
_ACTION_KINDS: tuple[ActionKind, ...] = ("resume", "alert", "cancel", "hold", "give_up")


class Action(_Strict):
    """One action: a one-key mapping in YAML (``- resume: {from: best}``) or a bare word (``- cancel``)."""

    resume: ResumeAction | None = None
    alert: AlertAction | None = None
    cancel: CancelAction | None = None
    hold: HoldAction | None = None
    give_up: GiveUpAction | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {data: {}}
        if isinstance(data, dict):
            return {k: ({} if v is None or v is True else v) for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> Action:
        set_ = [k for k in _ACTION_KINDS if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError(f"each action must be exactly one of {', '.join(_ACTION_KINDS)}")
        return self

    @property
    def kind(self) -> ActionKind:
        for k in _ACTION_KINDS:
            if getattr(self, k) is not None:
                return k
        raise AssertionError("validated action without a kind")


# ----------------------------------------------------------------------------- rules

Category = Literal[
    "failure", "time_limit", "preemption", "node_failure", "stall", "pending", "completed", "info"
]


class Rule(_Strict):
    name: str
    description: str = ""
    enabled: bool = True
    priority: int = Field(default=50, ge=0, le=1000)
    category: Category = Field(
        default="failure",
        description="how the resume policy counts it (time limits and preemptions are free)",
    )
    trigger: Trigger | None = None
    triggers: list[Trigger] = Field(default_factory=list)
    conditions: Conditions | None = None
    actions: list[Action] = Field(default_factory=list)
    retryable: bool = True
    deterministic: bool = False
    max_retries: int | None = Field(default=None, ge=0, le=1000)
    same_signature_limit: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="give up when this rule's failure recurs this many times in a row, progress or not",
    )
    inhibits: list[str] = Field(default_factory=list, description="rule names (or globs) this one suppresses")
    signature_group: str | int | None = Field(
        default=None,
        description="regex group whose text keys the failure signature (default: the whole match)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not RULE_NAME_RE.fullmatch(v):
            raise ValueError("1-63 characters: lowercase letters, digits, '-' or '_'")
        return v

    @model_validator(mode="after")
    def _shape(self) -> Rule:
        if self.trigger is not None and self.triggers:
            raise ValueError("use either trigger or triggers, not both")
        if self.trigger is None and not self.triggers and self.enabled:
            raise ValueError("a rule needs a trigger")
        if self.enabled and not self.actions:
            raise ValueError("a rule needs at least one action")
        kinds = [a.kind for a in self.actions]
        if "resume" in kinds and "give_up" in kinds:
            raise ValueError("a rule cannot both resume and give up")
        if not self.retryable and "resume" in kinds:
            raise ValueError("a non-retryable rule cannot resume (set retryable: true or use give_up)")
        return self

    @property
    def all_triggers(
        self,
    ) -> list[LogTrigger | StateTrigger | PendingTrigger | StalledTrigger | MissingTrigger | MetricTrigger]:
        return [self.trigger] if self.trigger is not None else list(self.triggers)


class RulesFile(_Strict):
    version: Literal[1] = 1
    incident_window_s: float = Field(default=600.0, alias="incident_window")
    rules: list[Rule] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("incident_window_s", mode="before")
    @classmethod
    def _window(cls, v: Any) -> float:
        return parse_duration(v)
