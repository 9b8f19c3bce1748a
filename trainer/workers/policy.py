"""The policy worker, so one data-parallel rank's model, optimizer and GRPO train step live in one actor."""

from __future__ import annotations

import copy
import os
import socket
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainer import faults, grpo
from trainer.models import ModelSpec, build_model, load_weights, save_weights, weights_for_sync
from trainer.workers import rng


def pick_device(requested: str) -> torch.device:
    """Under Ray each GPU actor sees only its own GPU (CUDA_VISIBLE_DEVICES), so it is always cuda:0."""
    if requested == "cpu":
        return torch.device("cpu")
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("cluster.device=cuda but CUDA is not available")
        return torch.device("cuda", 0)
    return torch.device("cpu")


def pack_batch(
    prompts: list[list[int]],
    responses: list[list[int]],
    sampler_logprobs: list[list[float]],
    advantages: list[float],
    pad_id: int,
) -> dict[str, torch.Tensor]:
    """Left-pad prompts and right-pad responses into one [B, P+R] batch.

    Targets are input_ids[:, 1:], so response token j of a row sits at target index P-1+j; the
    response mask marks exactly those positions (the eos included, padding excluded).
    """
    p = max(len(x) for x in prompts)
    r = max(1, max(len(x) for x in responses))
    b = len(prompts)
    ids = torch.full((b, p + r), pad_id, dtype=torch.long)
    mask = torch.zeros((b, p + r), dtype=torch.long)
    rmask = torch.zeros((b, p + r - 1), dtype=torch.float32)
    slp = torch.zeros((b, p + r - 1), dtype=torch.float32)
    for i, (pr, rs, lp) in enumerate(zip(prompts, responses, sampler_logprobs, strict=True)):
        ids[i, p - len(pr) : p] = torch.tensor(pr)
        mask[i, p - len(pr) : p] = 1
        if rs:
            ids[i, p : p + len(rs)] = torch.tensor(rs)
            mask[i, p : p + len(rs)] = 1
            rmask[i, p - 1 : p - 1 + len(rs)] = 1.0
            slp[i, p - 1 : p - 1 + len(rs)] = torch.tensor(lp, dtype=torch.float32)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "response_mask": rmask,
        "sampler_logprobs": slp,
        "advantages": torch.tensor(advantages, dtype=torch.float32),
    }


def shard_batch(batch: dict[str, torch.Tensor], rank: int, world: int) -> dict[str, torch.Tensor]:
    n = batch["input_ids"].shape[0]
    per = -(-n // world)
    return {k: v[rank * per : (rank + 1) * per] for k, v in batch.items()}


class PolicyWorker:
    def __init__(
        self,
        spec: ModelSpec,
        policy_cfg: Any,
        loss_cfg: Any,
        temperature: float,
        rank: int = 0,
        world_size: int = 1,
        device: str = "auto",
        torch_threads: int = 1,
        seed: int = 0,
        deterministic: bool = False,
    ) -> None:
        torch.set_num_threads(torch_threads)
        rng.deterministic_kernels(deterministic)
        rng.seed_all(seed + rank)
        self.rank, self.world = rank, world_size
        self.device = pick_device(device)
        self.cfg, self.loss_cfg, self.temperature = policy_cfg, loss_cfg, temperature
        self.model = build_model(spec).to(self.device)
        self.ref = None
        if loss_cfg.reference_policy_kl_penalty > 0:
            self.ref = copy.deepcopy(self.model).eval()
            for prm in self.ref.parameters():
                prm.requires_grad_(False)
        o = policy_cfg.optimizer
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=o.lr, betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay
        )
        warm = policy_cfg.scheduler.warmup_steps
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / warm) if warm > 0 else 1.0
        )
        self.use_bf16 = policy_cfg.precision == "bfloat16" and self.device.type == "cuda"

    # -- distributed ------------------------------------------------------------------------------------
    def master_address(self) -> tuple[str, int]:
        with socket.socket() as s:
            s.bind(("", 0))
            port = int(s.getsockname()[1])
        return socket.gethostbyname(socket.gethostname()), port

    def setup_distributed(self, addr: str, port: int) -> bool:
        """gloo on CPU, NCCL on GPU; called on every rank at once (init blocks until all join)."""
        if self.world <= 1:
            return False
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(backend, rank=self.rank, world_size=self.world)
        with torch.no_grad():  # identical start on every rank
            for p in self.model.parameters():
                dist.broadcast(p.data, src=0)
        return True

    def _all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(t)
        return t

    # -- training ---------------------------------------------------------------------------------------
    def train_step(
        self, batch: dict[str, torch.Tensor], global_tokens: float, step: int, fault: str | None = None
    ) -> dict[str, float]:
        if fault in faults.RAISING:
            faults.raise_fault(fault, rank=self.rank, step=step)
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        n = batch["input_ids"].shape[0]
        mb = self.cfg.train_micro_batch_size
        sums = torch.zeros(6, dtype=torch.float64)  # loss, kl, clip, tokens, gap, mult_err
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if self.use_bf16 else nullcontext()
        for start in range(0, n, mb):
            part = {k: v[start : start + mb].to(self.device) for k, v in batch.items()}
            with autocast:
                logits = self.model(part["input_ids"], part["attention_mask"])
            lp = grpo.token_logprobs(logits[:, :-1], part["input_ids"][:, 1:], self.temperature)
            ref_lp = None
            if self.ref is not None:
                with torch.no_grad(), autocast:
                    ref_logits = self.ref(part["input_ids"], part["attention_mask"])
                ref_lp = grpo.token_logprobs(ref_logits[:, :-1], part["input_ids"][:, 1:], self.temperature)
            advantages = faults.poison(part["advantages"]) if fault == "nan" else part["advantages"]
            loss, stats = grpo.clipped_pg_loss(
                lp,
                lp.detach(),
                advantages,
                part["response_mask"],
                self.loss_cfg.ratio_clip_min,
                self.loss_cfg.ratio_clip_max,
                ref_lp,
                self.loss_cfg.reference_policy_kl_penalty,
                normalizer=global_tokens,
            )
            loss.backward()
            gap = grpo.logprob_gap(part["sampler_logprobs"], lp.detach(), part["response_mask"])
            tok = float(stats["tokens"])
            sums += torch.tensor(
                [
                    float(stats["loss_sum"]),
                    float(stats["kl_sum"]),
                    float(stats["clip_frac_sum"]),
                    tok,
                    gap["logprob_gap"] * tok,
                    gap["token_mult_prob_error"] * tok,
                ],
                dtype=torch.float64,
            )
        if self.world > 1:
            for p in self.model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad)
            sums = self._all_reduce(sums.to(self.device)).cpu()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        lr = self.opt.param_groups[0]["lr"]
        self.opt.step()
        self.sched.step()
        tokens = max(float(sums[3]), 1.0)
        memory: dict[str, float] = {}
        if (
            self.device.type == "cuda"
        ):  # this process's peak so far (the rollout's too when cluster.ray=false)
            memory["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        return {
            **memory,
            "loss": float(sums[0]) / tokens,
            "kl": float(sums[1]) / tokens,
            "clip_frac": float(sums[2]) / tokens,
            "logprob_gap": float(sums[4]) / tokens,
            "token_mult_prob_error": float(sums[5]) / tokens,
            "grad_norm": float(grad_norm),
            "lr": float(lr),
        }

    def get_weights(self) -> dict[str, torch.Tensor]:
        return weights_for_sync(self.model)

    def hf_config(self) -> dict[str, Any]:
        return self.model.hf_config()

    # -- checkpoint -------------------------------------------------------------------------------------
    def save(self, policy_dir: str, rng_path: str) -> None:
        """Rank 0 writes weights and optimizer (identical on every rank); every rank writes its RNG."""
        d = Path(policy_dir)
        if self.rank == 0:
            save_weights(self.model, d / "weights")
            (d / "optimizer").mkdir(parents=True, exist_ok=True)
            torch.save(
                {"optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict()},
                d / "optimizer" / "optim.pt",
            )
        torch.save(rng.capture(), rng_path)

    def load(self, policy_dir: str, rng_path: str | None) -> None:
        d = Path(policy_dir)
        load_weights(self.model, d / "weights")
        state = torch.load(d / "optimizer" / "optim.pt", map_location=self.device, weights_only=False)
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        if rng_path and Path(rng_path).exists():
            rng.restore(torch.load(rng_path, weights_only=False))

    def shutdown(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()
