"""Generation backends behind one small interface; vLLM is imported only inside its own module."""

from trainer.generation.base import GenerationBackend, GenerationResult, sample_seed

__all__ = ["GenerationBackend", "GenerationResult", "make_backend", "sample_seed"]


def make_backend(kind: str, **kwargs: object) -> GenerationBackend:
    if kind == "torch":
        from trainer.generation.torch_backend import TorchGenerationBackend

        return TorchGenerationBackend(**kwargs)  # type: ignore[arg-type]
    if kind == "vllm":
        from trainer.generation.vllm_backend import VllmGenerationBackend

        return VllmGenerationBackend(**kwargs)  # type: ignore[arg-type]
    raise ValueError(f"policy.generation.backend: unknown backend {kind!r}")
