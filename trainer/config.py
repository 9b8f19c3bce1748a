"""Typed trainer config: YAML file + NeMo RL-style dotted overrides, validated at once.

Why typed dataclasses instead of a free dict: a typo in a key or a wrong type must fail
before Ray starts (minutes on a cluster), naming the exact key and the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A bad config file or override; the message names the key."""


@dataclass
class TinyModelConfig:
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 2
    max_seq_len: int = 64


@dataclass
class OptimizerConfig:
    name: str = "adamw"
    lr: float = 3e-4
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8


@dataclass
class SchedulerConfig:
    warmup_steps: int = 0


@dataclass
class VllmConfig:
    # On CPU vLLM reads gpu_memory_utilization as a share of host RAM; kv_cache_memory_bytes, when set, wins.
    gpu_memory_utilization: float = 0.5
    kv_cache_memory_bytes: int | None = None  # None: gpu_memory_utilization decides on GPU, 256 MiB on CPU
    tensor_parallel_size: int = 1
    enforce_eager: bool = True
    weight_sync: str = "auto"  # auto | collective_rpc | filesystem
    weight_sync_dir: str | None = None


@dataclass
class GenerationConfig:
    backend: str = "torch"  # torch | vllm
    max_new_tokens: int = 8
    temperature: float = 1.0
    num_chunks: int = 4
    vllm_cfg: VllmConfig = field(default_factory=VllmConfig)


@dataclass
class PolicyConfig:
    model_name: str = "tiny"  # tiny | tiny-llama | a local Hugging Face model directory
    tokenizer_name: str | None = None  # None: char tokenizer for tiny models, model_name otherwise
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    train_micro_batch_size: int = 128
    max_grad_norm: float = 1.0
    precision: str = "float32"  # float32 | bfloat16 (autocast on CUDA)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)


@dataclass
class LossConfig:
    ratio_clip_min: float = 0.2
    ratio_clip_max: float = 0.2
    reference_policy_kl_penalty: float = 0.0


@dataclass
class GrpoConfig:
    max_num_steps: int = 100
    num_prompts_per_step: int = 16
    num_generations_per_prompt: int = 8
    stop_at_step: int | None = None
    val_period: int = 10
    val_at_start: bool = True
    max_val_samples: int = 64
    use_leave_one_out_baseline: bool = True
    normalize_rewards: bool = True
    seed: int = 42


@dataclass
class DataConfig:
    task: str = "add_mod10"  # add_mod10 | reverse | jsonl
    train_jsonl_fpath: str | None = None
    validation_jsonl_fpath: str | None = None
    reward: str | None = None  # exact_match | partial_credit; None: the task's default
    reverse_len: int = 3
    reverse_alphabet: str = "abcd"


@dataclass
class CheckpointingConfig:
    enabled: bool = True
    checkpoint_dir: str = "results/grpo"
    metric_name: str = "val:accuracy"
    higher_is_better: bool = True
    keep_top_k: int | None = 3
    save_period: int = 10
    checkpoint_must_save_by: str | None = None  # "DD:HH:MM:SS" or "HH:MM:SS" after start


@dataclass
class LoggerConfig:
    log_dir: str = "logs"
    tensorboard_enabled: bool = True
    status_interval_s: float = 10.0
    tqdm_mininterval_s: float = 1.0


@dataclass
class ClusterConfig:
    ray: bool = True
    num_nodes: int = 1
    gpus_per_node: int = 0
    num_cpus: int | None = 2  # only for a local ray.init (no RAY_ADDRESS)
    policy_workers: int = 1
    rollout_workers: int = 1
    cpus_per_worker: float = 1.0
    torch_threads: int = 1
    device: str = "auto"  # auto | cpu | cuda
    # CUDA: deterministic kernels (torch.use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG=:4096:8,
    # cudnn.deterministic) so a resumed run repeats the straight one bit for bit; docs/trainer.md "On a GPU".
    deterministic: bool = False


@dataclass
class FaultConfig:
    kind: str = (
        "none"  # none | cuda_oom | run_config_missing | nccl_timeout | hang | signal | kill_in_checkpoint |
        # nan | reward_collapse | kl_blowup (docs/trainer.md)
    )
    at_step: int = 1
    only_first_attempt: bool = True
    signal: str = "SIGKILL"


@dataclass
class PaceConfig:
    """Minimum wall seconds of each phase (0: off), slept out at its end: tests of the daemon's stall rules
    get phases as long on a loaded machine as on a quiet one, and spend no CPU on them."""

    generation_s: float = 0.0
    training_s: float = 0.0
    validation_s: float = 0.0


@dataclass
class CacheHygieneConfig:
    strict: bool = False
    extra_dirs: list[str] = field(default_factory=list)


@dataclass
class TrainerConfig:
    grpo: GrpoConfig = field(default_factory=GrpoConfig)
    loss_fn: LossConfig = field(default_factory=LossConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpointing: CheckpointingConfig = field(default_factory=CheckpointingConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    fault: FaultConfig = field(default_factory=FaultConfig)
    pace: PaceConfig = field(default_factory=PaceConfig)
    cache_hygiene: CacheHygieneConfig = field(default_factory=CacheHygieneConfig)


_CHOICES: dict[str, tuple[str, ...]] = {
    "policy.generation.backend": ("torch", "vllm"),
    "policy.generation.vllm_cfg.weight_sync": ("auto", "collective_rpc", "filesystem"),
    "policy.precision": ("float32", "bfloat16"),
    "policy.optimizer.name": ("adamw",),
    "data.task": ("add_mod10", "reverse", "jsonl"),
    "data.reward": ("exact_match", "partial_credit"),
    "cluster.device": ("auto", "cpu", "cuda"),
    "fault.kind": (
        "none",
        "cuda_oom",
        "run_config_missing",
        "nccl_timeout",
        "hang",
        "signal",
        "kill_in_checkpoint",
        "nan",
        "reward_collapse",
        "kl_blowup",
    ),
}
_POSITIVE = (
    "grpo.max_num_steps",
    "grpo.num_prompts_per_step",
    "grpo.max_val_samples",
    "grpo.val_period",
    "policy.train_micro_batch_size",
    "policy.generation.max_new_tokens",
    "policy.generation.num_chunks",
    "policy.generation.vllm_cfg.tensor_parallel_size",
    "policy.tiny.n_layers",
    "policy.tiny.d_model",
    "policy.tiny.n_heads",
    "policy.tiny.max_seq_len",
    "checkpointing.save_period",
    "cluster.num_nodes",
    "cluster.policy_workers",
    "cluster.rollout_workers",
    "cluster.torch_threads",
    "data.reverse_len",
)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(key, inner[0], value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return _build(tp, value, key + ".")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (item_tp,) = typing.get_args(tp)
        return [_coerce(f"{key}[{i}]", item_tp, v) for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {_type_name(tp)}")


def _build(cls: Any, data: dict[str, Any], prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for k in data:
        if k not in names:
            raise ConfigError(f"{prefix}{k}: unknown key (known: {', '.join(sorted(names))})")
    kwargs = {k: _coerce(prefix + k, hints[k], v) for k, v in data.items()}
    return cls(**kwargs)


def to_dict(cfg: TrainerConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def _get(d: dict[str, Any], key: str) -> Any:
    cur: Any = d
    for part in key.split("."):
        cur = cur[part]
    return cur


def validate(cfg: TrainerConfig) -> None:
    d = to_dict(cfg)
    for key, choices in _CHOICES.items():
        v = _get(d, key)
        if v is not None and v not in choices:
            raise ConfigError(f"{key}: must be one of {', '.join(choices)}, got {v!r}")
    for key in _POSITIVE:
        if _get(d, key) <= 0:
            raise ConfigError(f"{key}: must be > 0, got {_get(d, key)!r}")
    g = cfg.grpo
    if g.num_generations_per_prompt < 2:
        raise ConfigError(
            "grpo.num_generations_per_prompt: must be >= 2 (GRPO compares samples within a group)"
        )
    if g.stop_at_step is not None and not 1 <= g.stop_at_step <= g.max_num_steps:
        raise ConfigError(f"grpo.stop_at_step: must be in 1..grpo.max_num_steps, got {g.stop_at_step}")
    if cfg.checkpointing.keep_top_k is not None and cfg.checkpointing.keep_top_k < 1:
        raise ConfigError("checkpointing.keep_top_k: must be >= 1 or null (keep all)")
    if ":" not in cfg.checkpointing.metric_name:
        raise ConfigError("checkpointing.metric_name: must look like 'val:accuracy' or 'train:reward_mean'")
    if cfg.checkpointing.checkpoint_must_save_by is not None:
        parse_duration(cfg.checkpointing.checkpoint_must_save_by, "checkpointing.checkpoint_must_save_by")
    if cfg.data.task == "jsonl" and not cfg.data.train_jsonl_fpath:
        raise ConfigError("data.train_jsonl_fpath: required when data.task is 'jsonl'")
    if not cfg.cluster.ray and (cfg.cluster.policy_workers > 1 or cfg.cluster.rollout_workers > 1):
        raise ConfigError("cluster.policy_workers: more than one worker needs cluster.ray=true")
    t = cfg.policy.tiny
    if t.d_model % t.n_heads:
        raise ConfigError("policy.tiny.d_model: must be divisible by policy.tiny.n_heads")
    if t.d_model // t.n_heads < 32:
        raise ConfigError(
            "policy.tiny.n_heads: head dim d_model/n_heads must be >= 32 (vLLM paged attention)"
        )
    kv_bytes = cfg.policy.generation.vllm_cfg.kv_cache_memory_bytes
    if kv_bytes is not None and kv_bytes <= 0:
        raise ConfigError("policy.generation.vllm_cfg.kv_cache_memory_bytes: must be > 0 or null")
    if cfg.policy.generation.temperature <= 0:
        raise ConfigError("policy.generation.temperature: must be > 0 (greedy is used only for validation)")
    if cfg.fault.kind == "signal":
        import signal as _signal

        if not hasattr(_signal, cfg.fault.signal):
            raise ConfigError(f"fault.signal: unknown signal name {cfg.fault.signal!r}")
    if cfg.fault.at_step < 0:
        raise ConfigError("fault.at_step: must be >= 0")
    for name, seconds in dataclasses.asdict(cfg.pace).items():
        if seconds < 0:
            raise ConfigError(f"pace.{name}: must be >= 0, got {seconds!r}")


def missing_packages(cfg: TrainerConfig, installed: Callable[[str], bool]) -> list[str]:
    """What this config needs that this Python lacks (ray, vllm), each naming the key that asks for it.

    GPU machines with only torch and transformers run `cluster.ray=false` and the torch backend; saying
    so before any work starts beats a ModuleNotFoundError traceback from inside the first Ray call.
    """
    problems = []
    if cfg.cluster.ray and not installed("ray"):
        problems.append(
            "cluster.ray: true needs the 'ray' package, which is not installed in this Python "
            "(pip install -e '.[trainer]', or set cluster.ray=false to run in one process)"
        )
    if cfg.policy.generation.backend == "vllm" and not installed("vllm"):
        problems.append(
            "policy.generation.backend: vllm needs the 'vllm' package, which is not installed in this "
            "Python (pip install -e '.[trainer,gpu]', or set policy.generation.backend=torch)"
        )
    return problems


def parse_duration(text: str, key: str = "duration") -> float:
    """'DD:HH:MM:SS', 'HH:MM:SS' or 'MM:SS' (NeMo RL's checkpoint_must_save_by) to seconds."""
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError:
        raise ConfigError(f"{key}: expected DD:HH:MM:SS, got {text!r}") from None
    if not 2 <= len(parts) <= 4 or any(p < 0 for p in parts):
        raise ConfigError(f"{key}: expected DD:HH:MM:SS, got {text!r}")
    mult = [1, 60, 3600, 86400]
    return float(sum(p * m for p, m in zip(reversed(parts), mult, strict=False)))


def apply_override(d: dict[str, Any], item: str) -> None:
    """Apply one `a.b.c=value`; the value is parsed as YAML so `x=3`, `x=null`, `x=[1,2]` work."""
    if "=" not in item:
        raise ConfigError(f"{item}: override must look like key=value")
    key, raw = item.split("=", 1)
    key = key.strip().lstrip("+")
    if not key:
        raise ConfigError(f"{item}: empty key in override")
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"{key}: cannot parse value {raw!r}: {e}") from None
    parts = key.split(".")
    cur = d
    for i, p in enumerate(parts[:-1]):
        nxt = cur.get(p)
        if nxt is None:
            nxt = {}
            cur[p] = nxt
        if not isinstance(nxt, dict):
            raise ConfigError(f"{'.'.join(parts[: i + 1])}: is a value, cannot set {key}")
        cur = nxt
    cur[parts[-1]] = value


def from_dict(data: dict[str, Any]) -> TrainerConfig:
    cfg: TrainerConfig = _build(TrainerConfig, data)
    validate(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainerConfig:
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"--config: file not found: {path}") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"--config: {path} is not valid YAML: {e}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"--config: {path} must hold a mapping at the top level")
        data = loaded
    for item in overrides:
        apply_override(data, item)
    return from_dict(data)


def config_hash(cfg: TrainerConfig) -> str:
    """sha256 over the canonical JSON of the effective config (first 16 hex digits)."""
    blob = json.dumps(to_dict(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def dump_yaml(cfg: TrainerConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
