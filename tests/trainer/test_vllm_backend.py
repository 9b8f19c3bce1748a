"""Contract of the vLLM backend; runs only where vllm (and CUDA) exist, never on the CPU path."""

from __future__ import annotations

import pytest

from trainer.generation.vllm_backend import vllm_available

ok, why = vllm_available()
pytestmark = pytest.mark.skipif(not ok, reason=why or "vllm unavailable")


def test_vllm_backend_generates_with_seeds_and_refits_weights() -> None:
    from trainer.generation.base import sample_seed
    from trainer.generation.vllm_backend import VllmGenerationBackend
    from trainer.models import ModelSpec, build_model, weights_for_sync
    from trainer.tokenizer import CharTokenizer

    tok = CharTokenizer("abcd>")
    spec = ModelSpec("tiny-llama", tok.vocab_size, seed=0)
    policy = build_model(spec)
    be = VllmGenerationBackend(
        spec,
        tok.pad_id,
        tok.eos_id,
        hf_config=policy.hf_config(),
        gpu_memory_utilization=0.2,
        weight_sync="auto",
    )
    try:
        be.update_weights(weights_for_sync(policy))
        prompts = [tok.encode("abc>"), tok.encode("dd>")]
        seeds = [sample_seed(0, 1, i) for i in range(2)]
        a = be.generate(prompts, seeds, 3)
        b = be.generate(prompts, seeds, 3)
        assert a.tokens == b.tokens  # per-sample seeds make sampling reproducible
        assert all(len(t) == len(lp) for t, lp in zip(a.tokens, a.logprobs, strict=True))
        be.sleep()
        be.wake()
        be.weight_sync = "filesystem"
        be.update_weights(weights_for_sync(policy))
        assert be.generate(prompts, seeds, 3).tokens == a.tokens
    finally:
        be.shutdown()
