"""GRPO math as pure tensor functions, so each piece is unit-tested without a model."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def group_advantages(
    rewards: torch.Tensor, leave_one_out: bool = True, normalize: bool = True, eps: float = 1e-6
) -> tuple[torch.Tensor, float]:
    """Advantages for rewards shaped [num_prompts, num_generations].

    Returns (advantages of the same shape, fraction of zero-variance groups). The baseline is
    the group mean, or with leave-one-out the mean of the *other* samples (NeMo RL). Dividing by
    the group std happens only where std > eps: a group whose samples all scored the same carries
    no signal and must give exactly zero, never 0/0.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be [num_prompts, >=2 generations], got {tuple(rewards.shape)}")
    r = rewards.to(torch.float64)
    g = r.shape[1]
    total = r.sum(dim=1, keepdim=True)
    baseline = (total - r) / (g - 1) if leave_one_out else total / g
    adv = r - baseline
    std = r.std(dim=1, keepdim=True)
    zero_var = std.squeeze(1) <= eps
    if normalize:
        adv = torch.where(std > eps, adv / std.clamp_min(eps), torch.zeros_like(adv))
    else:
        adv = torch.where(std > eps, adv, torch.zeros_like(adv))
    return adv.to(rewards.dtype if rewards.is_floating_point() else torch.float32), float(
        zero_var.float().mean()
    )


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(target) per position; logits [B, T, V] already aligned with targets [B, T]."""
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def clipped_pg_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    normalizer: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Token-level clipped policy-gradient loss (PPO/GRPO) with optional k3 KL to a reference.

    `advantages` is per sample [B] (broadcast over tokens) or per token [B, T]. The loss is the
    masked token sum divided by `normalizer` (the global token count across micro-batches and
    data-parallel ranks) so accumulation and all-reduce reproduce the single-batch mean exactly.
    Returned stats are masked sums, ready to be all-reduced and divided by the same count.
    """
    mask = mask.to(logprobs.dtype)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    adv = adv.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    kl = torch.zeros_like(per_token)
    if ref_logprobs is not None and kl_coef > 0:
        log_ratio = ref_logprobs - logprobs
        kl = torch.exp(log_ratio) - log_ratio - 1.0
        per_token = per_token + kl_coef * kl
    denom = float(mask.sum()) if normalizer is None else normalizer
    denom = max(denom, 1.0)
    loss = (per_token * mask).sum() / denom
    with torch.no_grad():
        clip_frac = ((unclipped != clipped).to(mask.dtype) * mask).sum()
        stats = {
            "loss_sum": (per_token * mask).sum().detach(),
            "kl_sum": (kl * mask).sum().detach(),
            "clip_frac_sum": clip_frac,
            "tokens": mask.sum().detach(),
        }
    return loss, stats


def logprob_gap(
    sampler_logprobs: torch.Tensor, trainer_logprobs: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """How far the sampler's log-probs are from the trainer's: a refit or precision bug shows here first.

    `token_mult_prob_error` is NeMo RL's metric: mean over tokens of exp(|lp_trainer - lp_sampler|),
    1.0 when equal.
    """
    m = mask.to(torch.float64)
    n = max(float(m.sum()), 1.0)
    diff = (trainer_logprobs.to(torch.float64) - sampler_logprobs.to(torch.float64)).abs() * m
    return {
        "logprob_gap": float(diff.sum() / n),
        "token_mult_prob_error": float((torch.exp(diff) * m).sum() / n),
    }
