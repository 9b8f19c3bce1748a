"""The single controller, so the order of a run's events lives in one loop you read top to bottom.

`Trainer.run` is that loop, like nanoGPT's: setup, then per step rollouts, rewards, advantages,
policy update, weight sync, validation, logging, checkpoint; each fault is one `faults.at` hook
and each save one `checkpointer` call. Everything with state lives in a worker or in the
PromptSource, and all of it goes into the checkpoint, so "stop at N, resume" == "run straight".
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import torch

from trainer import checkpoint as ckpt
from trainer import grpo
from trainer.cache_hygiene import check_caches
from trainer.config import TrainerConfig, config_hash, dump_yaml
from trainer.faults import FaultPlan, attempt_from_env
from trainer.generation import sample_seed
from trainer.models import ModelSpec
from trainer.stacks import enable_stack_dump
from trainer.tasks import PromptSource, Task, build_task
from trainer.tasks.rewards import exact_match
from trainer.telemetry import MetricsLogger, StatusFile, new_exp_dir, rollout_bar
from trainer.tokenizer import CharTokenizer, HFTokenizer, Tokenizer
from trainer.workers import rng
from trainer.workers.group import LocalGroup, RayCluster
from trainer.workers.policy import PolicyWorker, pack_batch, pick_device, shard_batch
from trainer.workers.rollout import RolloutWorker

log = structlog.get_logger(__name__)

EXIT_FINISHED = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_RESUME = 75  # EX_TEMPFAIL: stopped gracefully with a checkpoint; resume me


class StopFlag:
    """Set by SIGTERM/SIGUSR1; the loop finishes the current step, saves and exits 75.

    A second signal restores the default action and re-delivers it: an impatient operator (or
    Slurm after its grace period) still gets an immediate stop.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self._old: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            self._old[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.reason is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.reason = name
        log.warning(
            "stop requested: finishing this step, then checkpoint and exit",
            signal=name,
            exit_code=EXIT_RESUME,
        )

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


@dataclass(frozen=True, slots=True)
class Rollouts:
    """One step's samples: each prompt repeated num_generations_per_prompt times, with its answer."""

    prompts: list[list[int]]
    answers: list[str]
    tokens: list[list[int]]
    logprobs: list[list[float]]


class Laps:
    """Wall-clock seconds between marks, for the timing/train/* metrics and the deadline estimate."""

    def __init__(self) -> None:
        self._start = self._last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = now - self._last
        self._last = now

    @property
    def total(self) -> float:
        return self._last - self._start


def pad_phase(
    started: float,
    minimum_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Sleep out what `minimum_s` (a `pace.*` key) leaves of a phase begun at `started`; the seconds slept."""
    left = started + minimum_s - clock()
    if left <= 0:
        return 0.0
    sleep(left)
    return left


def make_tokenizer(cfg: TrainerConfig, task: Task) -> Tokenizer:
    name = cfg.policy.tokenizer_name
    if name == "char" or (name is None and cfg.policy.model_name in ("tiny", "tiny-llama")):
        return CharTokenizer(task.alphabet)
    return HFTokenizer(name or cfg.policy.model_name)


class Trainer:
    """One run: `run()` is the loop; the methods below it are its phases, in the order it calls them."""

    def __init__(self, cfg: TrainerConfig, resume_from: str | None = None) -> None:
        self.cfg = cfg
        self.resume_from = resume_from
        self.hash = config_hash(cfg)
        self.log_dir = Path(cfg.logger.log_dir).resolve()
        self.ckpt_dir = Path(cfg.checkpointing.checkpoint_dir).resolve()
        self.stop = StopFlag()
        self.faults = FaultPlan(None)
        self.status: StatusFile | None = None
        self.metrics: MetricsLogger | None = None
        self.cluster: RayCluster | None = None
        self.policy: Any = None
        self.rollout: Any = None
        self.step_times: list[float] = []
        self.t0 = time.time()

    # -- the run -----------------------------------------------------------------------------------------
    def run(self) -> int:
        """Setup, then one GRPO step at a time until the last step or a graceful stop."""
        cfg = self.cfg
        start = self._setup()
        assert self.status is not None
        metrics: dict[str, float] = {}
        step = start
        while step < cfg.grpo.max_num_steps:
            if reason := self._stop_requested():
                return self._stop(step, metrics, reason, validated=False)
            step += 1
            self.faults.at(step, "step")
            laps = Laps()
            batch = self._rollouts(step, fault=self.faults.at(step, "rollout"))
            laps.mark("generation")
            rewards = self._rewards(batch)
            if self.faults.at(step, "reward") == "reward_collapse":
                rewards = torch.zeros_like(rewards)
            advantages, zero_var = grpo.group_advantages(
                rewards, cfg.grpo.use_leave_one_out_baseline, cfg.grpo.normalize_rewards
            )
            train = self._update(step, batch, advantages, fault=self.faults.at(step, "train"))
            laps.mark("policy_training")
            self._sync_weights(perturb_seed=step if self.faults.at(step, "sync") == "kl_blowup" else None)
            laps.mark("weight_sync")
            self.step_times.append(laps.total)
            metrics = self._step_metrics(batch, rewards, zero_var, train, laps)

            last = step == cfg.grpo.max_num_steps
            reason = "grpo.stop_at_step" if step == cfg.grpo.stop_at_step else self._stop_requested()
            if self._validation_due(step, last, stopping=reason is not None):
                metrics.update(self._validate(step))
            self._log(step, metrics)
            self.checkpointer.save(step, metrics, last_step=last, stopping=reason is not None)
            # NOTE: a stop asked for during the last step just finishes (exit 0) and, as before this
            # refactor, saves nothing: step_N of the last step is then missing (likely a bug).
            if reason is not None and not last:
                return self._stop(step, metrics, reason, validated=True)
        self.status.update(state="finished", phase="finished", exit_code=EXIT_FINISHED)
        log.info("run finished", steps=step)
        return EXIT_FINISHED

    # -- setup -------------------------------------------------------------------------------------------
    def _setup(self) -> int:
        """Everything before the first step (workers up, state restored); returns the step to start after."""
        cfg = self.cfg
        self._check_caches()
        self.task = build_task(cfg.data)
        self.tok = make_tokenizer(cfg, self.task)
        self.val_set = self.task.validation_set(cfg.grpo.max_val_samples, cfg.grpo.seed)
        self.source = PromptSource(self.task, cfg.grpo.seed)
        t = cfg.policy.tiny
        spec = ModelSpec(
            cfg.policy.model_name,
            self.tok.vocab_size,
            t.n_layers,
            t.d_model,
            t.n_heads,
            t.max_seq_len,
            cfg.grpo.seed,
        )
        resume_path = ckpt.find_resume_point(
            self.ckpt_dir, enabled=cfg.checkpointing.enabled, resume_from=self.resume_from
        )
        info = ckpt.read_info(resume_path) if resume_path else None
        self.exp_dir = self._exp_dir(info)
        (self.exp_dir / "config.yaml").write_text(dump_yaml(cfg))
        (self.exp_dir / "config_hash.txt").write_text(self.hash + "\n")
        attempt = attempt_from_env(os.environ)
        self.faults = FaultPlan.from_config(cfg.fault, resumed=resume_path is not None, env=os.environ)
        self.status = StatusFile(
            self.log_dir / "status.json",
            cfg.logger.status_interval_s,
            {
                "total_steps": cfg.grpo.max_num_steps,
                "exp_dir": str(self.exp_dir),
                "config_hash": self.hash,
                "attempt": attempt,
                "metric_name": cfg.checkpointing.metric_name,
                "resumed_from": str(resume_path) if resume_path else None,
            },
        )
        self.status.start_heartbeat()
        self.checkpointer = ckpt.Checkpointer(
            cfg.checkpointing,
            self.ckpt_dir,
            ckpt.RunInfo(cfg.grpo.max_num_steps, self.hash, self.exp_dir.name),
            write_state=self._write_state,
            consumed=self._consumed,
            status=self.status,
            started_at=self.t0,
        )
        log.info(
            "run starting",
            exp_dir=str(self.exp_dir),
            config_hash=self.hash,
            attempt=attempt,
            resume_from=str(resume_path) if resume_path else None,
            fault=self.faults.kind,
        )
        self.faults.at(0, "startup")

        self._start_workers(spec)
        self.stop.install()  # after ray.init, which may install its own handlers
        enable_stack_dump()  # where the driver is stuck, on SIGUSR2 (Shepherd's forensics)
        start = self._load(resume_path) if resume_path else 0
        self.metrics = MetricsLogger(
            self.exp_dir, cfg.logger.tensorboard_enabled, start if resume_path else None
        )
        self._sync_weights()
        self.status.update(step=start, state="starting")
        if start == 0 and cfg.grpo.val_at_start:
            val = self._validate(0)
            self.metrics.log(0, val)
            log.info("validation at start", **val)
        return start

    def _check_caches(self) -> None:
        bad = []
        for c in check_caches(os.environ, self.cfg.cache_hygiene.extra_dirs):
            if c.ok:
                log.info("cache dir ok", var=c.name, path=c.path)
            else:
                log.warning("cache dir unusable", var=c.name, path=c.path, reason=c.reason)
                bad.append(f"{c.name}={c.path} {c.reason}")
        if bad and self.cfg.cache_hygiene.strict:
            raise RuntimeError("cache directories not usable: " + "; ".join(bad))

    def _exp_dir(self, info: dict[str, Any] | None) -> Path:
        """A resume reuses the run's exp_NNN (events after the checkpoint purged); a new run gets the next."""
        if info and info.get("exp_dir"):
            p = self.log_dir / str(info["exp_dir"])
            if p.is_dir():
                return p
        return new_exp_dir(self.log_dir)

    def _start_workers(self, spec: ModelSpec) -> None:
        c, g = self.cfg.cluster, self.cfg.policy.generation
        device = c.device
        if device == "auto" and c.gpus_per_node == 0 and c.ray:
            device = "cpu"  # actors get no GPU without gpus_per_node: don't let them grab one anyway
        temp = g.temperature
        backend_kwargs: dict[str, Any] = {
            "spec": spec,
            "pad_id": self.tok.pad_id,
            "eos_id": self.tok.eos_id,
            "temperature": temp,
        }
        if g.backend == "vllm":
            v = g.vllm_cfg
            backend_kwargs.update(
                model_dir=None if spec.model_name in ("tiny", "tiny-llama") else spec.model_name,
                gpu_memory_utilization=v.gpu_memory_utilization,
                kv_cache_memory_bytes=v.kv_cache_memory_bytes,
                dtype=torch.bfloat16 if self.cfg.policy.precision == "bfloat16" else torch.float32,
                tensor_parallel_size=v.tensor_parallel_size,
                enforce_eager=v.enforce_eager,
                weight_sync=v.weight_sync,
                weight_sync_dir=v.weight_sync_dir,
                seed=self.cfg.grpo.seed,
            )
            if spec.model_name == "tiny":
                raise RuntimeError(
                    "policy.generation.backend=vllm: use policy.model_name=tiny-llama or a local HF "
                    "model; the built-in 'tiny' architecture is not a vLLM model"
                )

        def policy_kwargs(rank: int) -> dict[str, Any]:
            return {
                "spec": spec,
                "policy_cfg": self.cfg.policy,
                "loss_cfg": self.cfg.loss_fn,
                "temperature": temp,
                "rank": rank,
                "world_size": c.policy_workers,
                "device": device,
                "torch_threads": c.torch_threads,
                "seed": self.cfg.grpo.seed,
                "deterministic": c.deterministic,
            }

        def rollout_kwargs(rank: int) -> dict[str, Any]:
            return {
                "backend": g.backend,
                "backend_kwargs": backend_kwargs,
                "device": device,
                "torch_threads": c.torch_threads,
                "seed": self.cfg.grpo.seed + 1000 + rank,
                "deterministic": c.deterministic,
            }

        if c.ray:
            self.cluster = RayCluster(c, c.policy_workers + c.rollout_workers)
            self.policy = self.cluster.spawn(PolicyWorker, policy_kwargs, c.policy_workers)
            if g.backend == "vllm" and spec.model_name == "tiny-llama":
                backend_kwargs["hf_config"] = self.policy.call("hf_config")[0]
            self.rollout = self.cluster.spawn(RolloutWorker, rollout_kwargs, c.rollout_workers)
            if c.policy_workers > 1:
                addr, port = self.policy.call("master_address")[0]
                self.policy.call("setup_distributed", addr, port)
        else:
            self.policy = LocalGroup([PolicyWorker(**policy_kwargs(0))])
            if g.backend == "vllm" and spec.model_name == "tiny-llama":
                backend_kwargs["hf_config"] = self.policy.workers[0].hf_config()
            self.rollout = LocalGroup([RolloutWorker(**rollout_kwargs(0))])
        log.info(
            "workers ready",
            ray=c.ray,
            policy_workers=c.policy_workers,
            rollout_workers=c.rollout_workers,
            device=str(pick_device(device)),
            backend=g.backend,
        )

    def _sync_weights(self, perturb_seed: int | None = None) -> None:
        weights = self.policy.ref(0, "get_weights")
        self.rollout.call("update_weights", weights, perturb_seed)

    # -- the phases of a step ----------------------------------------------------------------------------
    def _generate(
        self, step: int, prompts: list[list[int]], greedy: bool, bar_phase: str | None, hang: bool = False
    ) -> tuple[list[list[int]], list[list[float]]]:
        n = len(prompts)
        seeds = [sample_seed(self.cfg.grpo.seed, step, i) for i in range(n)]
        chunks = max(1, min(self.cfg.policy.generation.num_chunks, n))
        per = -(-n // chunks)
        spans = [(s, min(s + per, n)) for s in range(0, n, per)]
        max_new = self.cfg.policy.generation.max_new_tokens
        jobs = [(prompts[a:b], seeds[a:b], max_new, greedy, hang and k > 0) for k, (a, b) in enumerate(spans)]
        tokens: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        bar = rollout_bar(n, self.cfg.logger.tqdm_mininterval_s) if bar_phase else None
        done = 0
        try:
            for k, res in self.rollout.imap_unordered("generate", jobs):
                a, b = spans[k]
                tokens[a:b], lps[a:b] = res.tokens, res.logprobs
                done += b - a
                if bar is not None:
                    bar.update(b - a)
                    rate = bar.format_dict.get("rate")
                    assert self.status is not None
                    self.status.update(phase_done=done, phase_total=n, rate=rate, rate_unit="samples/s")
        finally:
            if bar is not None:
                bar.close()
        return tokens, lps

    def _validate(self, step: int) -> dict[str, float]:
        assert self.status is not None
        started = time.monotonic()
        self.status.update(
            state="validating", phase="validating", phase_done=0, phase_total=len(self.val_set), rate=None
        )
        prompts = [self.tok.encode(e.prompt) for e in self.val_set]
        tokens, _ = self._generate(0, prompts, greedy=True, bar_phase=None)
        pad_phase(started, self.cfg.pace.validation_s)
        texts = [self.tok.decode(t) for t in tokens]
        acc = sum(exact_match(t, e.answer) for t, e in zip(texts, self.val_set, strict=True)) / len(texts)
        rew = sum(self.task.reward(t, e.answer) for t, e in zip(texts, self.val_set, strict=True)) / len(
            texts
        )
        self.status.update(phase_done=len(self.val_set))
        return {"val/accuracy": acc, "val/reward_mean": rew}

    def _rollouts(self, step: int, fault: str | None) -> Rollouts:
        """This step's prompts, each sampled num_generations_per_prompt times by the rollout workers."""
        cfg = self.cfg
        assert self.status is not None
        started = time.monotonic()
        g = cfg.grpo.num_generations_per_prompt
        self.status.update(
            state="generating",
            phase="generating",
            step=step - 1,
            phase_done=0,
            phase_total=cfg.grpo.num_prompts_per_step * g,
            rate=None,
        )
        examples = self.source.next_batch(cfg.grpo.num_prompts_per_step)
        prompts = [self.tok.encode(e.prompt) for e in examples for _ in range(g)]
        tokens, logprobs = self._generate(
            step, prompts, greedy=False, bar_phase="generating", hang=fault == "hang"
        )
        pad_phase(started, cfg.pace.generation_s)
        answers = [e.answer for e in examples for _ in range(g)]
        return Rollouts(prompts, answers, tokens, logprobs)

    def _rewards(self, batch: Rollouts) -> torch.Tensor:
        """The task's reward for each sample, one row per prompt group."""
        scores = [
            self.task.reward(self.tok.decode(t), a) for t, a in zip(batch.tokens, batch.answers, strict=True)
        ]
        return torch.tensor(scores, dtype=torch.float32).view(-1, self.cfg.grpo.num_generations_per_prompt)

    def _update(
        self, step: int, batch: Rollouts, advantages: torch.Tensor, fault: str | None
    ) -> dict[str, float]:
        """One optimizer step on the policy workers (data-parallel shards); rank 0's stats."""
        assert self.status is not None
        packed = pack_batch(
            batch.prompts, batch.tokens, batch.logprobs, advantages.flatten().tolist(), self.tok.pad_id
        )
        global_tokens = float(packed["response_mask"].sum())
        started = time.monotonic()
        self.status.update(state="training", phase="training", phase_done=0, phase_total=1, rate=None)
        world = len(self.policy)
        shards = [(shard_batch(packed, r, world), global_tokens, step, fault) for r in range(world)]
        stats: dict[str, float] = self.policy.call("train_step", per_worker=shards)[0]
        pad_phase(started, self.cfg.pace.training_s)
        return stats

    def _step_metrics(
        self,
        batch: Rollouts,
        rewards: torch.Tensor,
        zero_var: float,
        train: dict[str, float],
        laps: Laps,
    ) -> dict[str, float]:
        n, gen_tokens, total = len(batch.tokens), sum(len(t) for t in batch.tokens), laps.total
        # what the update ran forward and backward on: prompt + response tokens, padding excluded
        train_tokens = gen_tokens + sum(len(p) for p in batch.prompts)
        limit, eos = self.cfg.policy.generation.max_new_tokens, self.tok.eos_id
        cut = sum(1 for t in batch.tokens if len(t) >= limit and (not t or t[-1] != eos))
        train = dict(train)
        memory: dict[str, float] = {}
        if "peak_gpu_memory_gib" in train:
            memory["performance/peak_gpu_memory_gib"] = train.pop("peak_gpu_memory_gib")
        return {
            "train/reward_mean": float(rewards.mean()),
            "train/reward_std": float(rewards.std()),
            "train/zero_variance_group_frac": zero_var,
            "train/mean_gen_tokens_per_sample": gen_tokens / n,
            "train/truncated_frac": cut / n,
            **{f"train/{k}": v for k, v in train.items()},
            **{f"timing/train/{k}": v for k, v in laps.seconds.items()},
            "timing/train/total_step_time": total,
            "performance/tokens_per_sec": gen_tokens / max(total, 1e-9),
            "performance/samples_per_sec": n / max(total, 1e-9),
            "performance/generated_tokens": float(gen_tokens),
            "performance/training_tokens": float(train_tokens),
            "performance/generation_tokens_per_sec": gen_tokens / max(laps.seconds["generation"], 1e-9),
            "performance/training_tokens_per_sec": train_tokens / max(laps.seconds["policy_training"], 1e-9),
            **memory,
        }

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        """TensorBoard + metrics.jsonl, status.json, and the `Step N/TOTAL` line."""
        assert self.status is not None and self.metrics is not None
        self.metrics.log(step, metrics)
        self.status.update(step=step, state="training")
        log.info(
            f"Step {step}/{self.cfg.grpo.max_num_steps}",
            **{k: round(v, 4) for k, v in metrics.items() if not k.startswith(("timing/", "performance/"))},
        )

    # -- checkpointing -----------------------------------------------------------------------------------
    def _write_state(self, directory: Path, step: int) -> None:
        """Everything a resume needs, into a tmp_step_N (the Checkpointer adds training_info.json last)."""
        (directory / "rng").mkdir()
        self.policy.call(
            "save",
            per_worker=[
                (str(directory / "policy"), str(directory / "rng" / f"policy_rank{r}.pt"))
                for r in range(len(self.policy))
            ],
        )
        self.rollout.call(
            "save_rng",
            per_worker=[(str(directory / "rng" / f"rollout_rank{r}.pt"),) for r in range(len(self.rollout))],
        )
        self.tok.save(directory / "policy" / "tokenizer")
        torch.save({"prompt_source": self.source.state_dict()}, directory / "train_dataloader.pt")
        torch.save(rng.capture(), directory / "rng" / "driver.pt")
        (directory / "config.yaml").write_text(dump_yaml(self.cfg))
        self.faults.at(step, "checkpoint")

    def _consumed(self) -> tuple[int, int]:
        """(prompts, samples) used so far, for training_info.json."""
        prompts = self.source.consumed
        return prompts, prompts * self.cfg.grpo.num_generations_per_prompt

    def _load(self, path: Path) -> int:
        info = ckpt.read_info(path)
        self.policy.call(
            "load",
            per_worker=[
                (str(path / "policy"), str(path / "rng" / f"policy_rank{r}.pt"))
                for r in range(len(self.policy))
            ],
        )
        self.rollout.call(
            "load_rng",
            per_worker=[(str(path / "rng" / f"rollout_rank{r}.pt"),) for r in range(len(self.rollout))],
        )
        data = torch.load(path / "train_dataloader.pt", weights_only=False)
        self.source.load_state_dict(data["prompt_source"])
        rng.restore(torch.load(path / "rng" / "driver.pt", weights_only=False))
        if info.get("config_hash") != self.hash:
            log.warning(
                "resuming with a different config",
                checkpoint_hash=info.get("config_hash"),
                config_hash=self.hash,
            )
        log.info("resumed", checkpoint=str(path), step=info["step"])
        return int(info["step"])

    # -- deciding and stopping ---------------------------------------------------------------------------
    def _validation_due(self, step: int, last_step: bool, stopping: bool) -> bool:
        """Every val_period steps, at the last step, and before a save ranked by a `val:` metric."""
        if step % self.cfg.grpo.val_period == 0 or last_step:
            return True
        saving = self.checkpointer.due(step, last_step=last_step, stopping=stopping)
        return saving and self.checkpointer.needs_validation

    def _stop_requested(self) -> str | None:
        """Why to stop after this step (a signal or the save-by deadline), or None to go on."""
        if self.stop.reason:
            return self.stop.reason
        if self.checkpointer.deadline_near(self.step_times):
            return "checkpoint_must_save_by"
        return None

    def _stop(self, step: int, metrics: dict[str, float], reason: str, *, validated: bool) -> int:
        """Graceful stop: make sure step_N is on disk, then exit 75 so the daemon resumes the run."""
        assert self.status is not None
        self.faults.disarm()  # the stop checkpoint must land
        if not validated and self.checkpointer.needs_validation and self.checkpointer.due_before_stop(step):
            metrics = {**metrics, **self._validate(step)}
        self.checkpointer.save_before_stop(step, metrics)
        self.status.update(state="stopped", phase="stopped", exit_code=EXIT_RESUME, stop_reason=reason)
        log.warning("stopped gracefully; resume me", reason=reason, step=step, exit_code=EXIT_RESUME)
        return EXIT_RESUME

    def fail(self, exc: BaseException) -> int:
        first = (str(exc).strip().splitlines() or [""])[0]
        if self.status is not None:
            self.status.update(
                state="failed",
                phase="failed",
                exit_code=EXIT_FAILED,
                error=f"{type(exc).__name__}: {first}"[:1000],
            )
        return EXIT_FAILED

    def close(self) -> None:
        self.stop.restore()
        for group in (self.rollout, self.policy):
            if group is not None:
                try:
                    group.shutdown()
                except Exception as e:
                    log.warning("shutdown failed", error=str(e))
        if self.cluster is not None:
            self.cluster.shutdown()
        if self.metrics is not None:
            self.metrics.close()
        if self.status is not None:
            self.status.close()


def run(cfg: TrainerConfig, resume_from: str | None = None) -> int:
    """Run a job; returns the process exit code (0 finished, 75 stopped-resume-me, 1 failed)."""
    trainer = Trainer(cfg, resume_from)
    try:
        return trainer.run()
    except Exception as e:
        traceback.print_exc()
        return trainer.fail(e)
    finally:
        trainer.close()
