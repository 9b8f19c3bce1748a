"""vLLM generation backend (GPU; optional extra pinned to vllm 0.32.x).

vLLM is imported only here, inside functions, so the CPU path never imports it. The engine starts
with dummy weights (load_format="dummy") and is refit from the policy after every step, as NeMo RL
does: first through `collective_rpc` into a worker extension that calls the model's `load_weights`
(tensors travel with the RPC), else through a safetensors file the workers read from a shared path
(the fallback prime-rl uses on CI where in-band transfer is fragile).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from trainer.generation.base import GenerationBackend, GenerationResult
from trainer.models import ModelSpec


def vllm_available() -> tuple[bool, str]:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return (
            False,
            "vllm is not installed (optional extra: pip install 'shepherd[gpu]', vllm 0.32.x, CUDA only)",
        )
    if not torch.cuda.is_available():
        return False, "vllm needs CUDA and no CUDA device is available"
    return True, ""


class WeightSyncExtension:
    """Mixed into vLLM's worker via `worker_extension_cls`; its methods run inside every vLLM worker."""

    model_runner: Any

    def shepherd_load_tensors(self, named: list[tuple[str, torch.Tensor]]) -> int:
        device = next(self.model_runner.model.parameters()).device
        self.model_runner.model.load_weights(weights=[(k, v.to(device)) for k, v in named])
        return len(named)

    def shepherd_load_file(self, path: str) -> int:
        from safetensors.torch import load_file

        state = load_file(path, device="cpu")
        return self.shepherd_load_tensors(list(state.items()))


class VllmGenerationBackend(GenerationBackend):
    def __init__(
        self,
        spec: ModelSpec,
        pad_id: int,
        eos_id: int,
        temperature: float = 1.0,
        device: str = "cuda",
        dtype: torch.dtype = torch.bfloat16,
        model_dir: str | None = None,
        hf_config: dict[str, Any] | None = None,
        gpu_memory_utilization: float = 0.5,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = True,
        weight_sync: str = "auto",
        weight_sync_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        ok, why = vllm_available()
        if not ok:
            raise RuntimeError(f"policy.generation.backend=vllm: {why}")
        from vllm import LLM

        if model_dir is None:
            # a model built from a config (tiny-llama): vLLM only needs its config.json, weights come by refit
            if hf_config is None:
                raise ValueError("vllm backend needs model_dir or hf_config")
            model_dir = tempfile.mkdtemp(prefix="shepherd-vllm-model-")
            (Path(model_dir) / "config.json").write_text(json.dumps(hf_config))
        self.pad_id, self.eos_id, self.temperature = pad_id, eos_id, temperature
        self.weight_sync = weight_sync
        self.sync_dir = Path(weight_sync_dir or tempfile.mkdtemp(prefix="shepherd-vllm-sync-"))
        self.llm: Any = LLM(
            model=model_dir,
            skip_tokenizer_init=True,
            load_format="dummy",
            dtype="bfloat16" if dtype == torch.bfloat16 else "float32",
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            enforce_eager=enforce_eager,
            enable_sleep_mode=True,
            seed=seed,
            worker_extension_cls=f"{__name__}.WeightSyncExtension",
        )

    def generate(
        self, prompts: list[list[int]], seeds: list[int], max_new_tokens: int, greedy: bool = False
    ) -> GenerationResult:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [
            SamplingParams(
                n=1,
                temperature=0.0 if greedy else self.temperature,
                max_tokens=max_new_tokens,
                seed=s,
                logprobs=0,
                stop_token_ids=[self.eos_id],
                detokenize=False,
            )
            for s in seeds
        ]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        tokens, logprobs = [], []
        for out in outs:
            comp = out.outputs[0]
            toks = list(comp.token_ids)
            lps = [float(step[t].logprob) for step, t in zip(comp.logprobs or [], toks, strict=False)]
            tokens.append(toks)
            logprobs.append(lps if len(lps) == len(toks) else [0.0] * len(toks))
        return GenerationResult(tokens, logprobs)

    def update_weights(self, state: dict[str, torch.Tensor]) -> None:
        if self.weight_sync in ("auto", "collective_rpc"):
            try:
                self.llm.collective_rpc("shepherd_load_tensors", args=(list(state.items()),))
                self._after_refit()
                return
            except Exception:
                if self.weight_sync == "collective_rpc":
                    raise
        from safetensors.torch import save_file

        self.sync_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.sync_dir / f"weights.{os.getpid()}.tmp.safetensors"
        final = self.sync_dir / "weights.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp))
        os.replace(tmp, final)
        self.llm.collective_rpc("shepherd_load_file", args=(str(final),))
        self._after_refit()

    def _after_refit(self) -> None:
        # cached KV blocks were computed with the old weights
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if reset is not None:
            reset()

    def sleep(self) -> None:
        self.llm.sleep(level=1)

    def wake(self) -> None:
        self.llm.wake_up()

    def shutdown(self) -> None:
        del self.llm
        import gc

        gc.collect()
        torch.cuda.empty_cache()
