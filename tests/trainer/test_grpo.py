"""GRPO math: advantages, the clipped loss with masking and KL, and the sampler/trainer gap."""

from __future__ import annotations

import pytest
import torch

from trainer import grpo


def test_leave_one_out_baseline_is_mean_of_the_other_samples() -> None:
    r = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    adv, _ = grpo.group_advantages(r, leave_one_out=True, normalize=False)
    assert adv[0, 0].item() == pytest.approx(1.0)  # others average 0
    assert adv[0, 1].item() == pytest.approx(-1.0 / 3)  # others average 1/3


def test_plain_group_mean_baseline_and_std_normalisation() -> None:
    r = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    adv, _ = grpo.group_advantages(r, leave_one_out=False, normalize=True)
    std = r.std().item()
    assert adv[0].tolist() == pytest.approx([0.5 / std, -0.5 / std, 0.5 / std, -0.5 / std])


def test_zero_variance_groups_give_exactly_zero_and_are_counted() -> None:
    r = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.5]])
    adv, frac = grpo.group_advantages(r, leave_one_out=True, normalize=True)
    assert torch.isfinite(adv).all()
    assert adv[[0, 1, 3]].abs().sum().item() == 0.0
    assert adv[2].abs().sum().item() > 0
    assert frac == pytest.approx(0.75)


def test_group_advantages_rejects_single_sample_groups() -> None:
    with pytest.raises(ValueError):
        grpo.group_advantages(torch.tensor([[1.0], [0.0]]))


def test_masked_tokens_do_not_contribute_to_the_loss_or_gradient() -> None:
    lp = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, stats = grpo.clipped_pg_loss(lp, lp.detach(), torch.tensor([2.0]), mask)
    loss.backward()
    assert lp.grad is not None
    assert lp.grad[0, 2].item() == 0.0
    assert lp.grad[0, 0].item() == pytest.approx(-2.0 / 2)  # -A / tokens
    assert stats["tokens"].item() == 2


def test_ratio_is_clipped_for_positive_advantage() -> None:
    old = torch.zeros(1, 1)
    lp = torch.log(torch.tensor([[1.5]])).requires_grad_()  # ratio 1.5 > 1.2
    loss, stats = grpo.clipped_pg_loss(lp, old, torch.tensor([1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(-1.2)
    assert stats["clip_frac_sum"].item() == 1.0
    loss.backward()
    assert lp.grad is not None and lp.grad.abs().sum().item() == 0.0  # clipped: no gradient


def test_normalizer_makes_microbatch_sums_equal_full_batch_mean() -> None:
    lp = torch.randn(4, 5)
    mask = (torch.rand(4, 5) > 0.3).float()
    adv = torch.randn(4)
    full, _ = grpo.clipped_pg_loss(lp, lp, adv, mask)
    n = float(mask.sum())
    halves = sum(
        grpo.clipped_pg_loss(lp[i : i + 2], lp[i : i + 2], adv[i : i + 2], mask[i : i + 2], normalizer=n)[0]
        for i in (0, 2)
    )
    assert float(halves) == pytest.approx(float(full), abs=1e-6)


def test_kl_penalty_is_zero_at_the_reference_and_positive_away_from_it() -> None:
    lp = torch.tensor([[-1.0, -1.0]])
    mask = torch.ones(1, 2)
    _, same = grpo.clipped_pg_loss(lp, lp, torch.zeros(1), mask, ref_logprobs=lp.clone(), kl_coef=0.1)
    _, away = grpo.clipped_pg_loss(lp, lp, torch.zeros(1), mask, ref_logprobs=lp - 0.5, kl_coef=0.1)
    assert same["kl_sum"].item() == pytest.approx(0.0)
    assert away["kl_sum"].item() > 0


def test_logprob_gap_is_zero_for_equal_logprobs_and_ignores_masked_tokens() -> None:
    a = torch.tensor([[-1.0, -2.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    assert grpo.logprob_gap(a, a, mask) == {"logprob_gap": 0.0, "token_mult_prob_error": 1.0}
    b = torch.tensor([[-1.5, -2.0, 0.0]])
    gap = grpo.logprob_gap(a, b, mask)
    assert gap["logprob_gap"] == pytest.approx(0.25)
    assert gap["token_mult_prob_error"] > 1.0


def test_token_logprobs_match_log_softmax() -> None:
    logits = torch.randn(2, 3, 7)
    targets = torch.randint(0, 7, (2, 3))
    got = grpo.token_logprobs(logits, targets)
    want = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
    assert torch.allclose(got, want)
