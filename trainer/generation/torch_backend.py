"""A plain torch sampling loop, so generation works on CPU and GPU without vLLM (the default backend)."""

from __future__ import annotations

import torch

from trainer.generation.base import GenerationBackend, GenerationResult
from trainer.models import ModelSpec, PolicyModel, build_model


class TorchGenerationBackend(GenerationBackend):
    """Recomputes the full prefix each token: fine for toy sequences, simple to trust for log-probs."""

    def __init__(
        self,
        spec: ModelSpec,
        pad_id: int,
        eos_id: int,
        temperature: float = 1.0,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        model: PolicyModel | None = None,
    ) -> None:
        self.device = torch.device(device)
        self.model = model if model is not None else build_model(spec, dtype)
        self.model.to(self.device).eval()
        self.pad_id, self.eos_id, self.temperature = pad_id, eos_id, temperature

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], seeds: list[int], max_new_tokens: int, greedy: bool = False
    ) -> GenerationResult:
        if len(prompts) != len(seeds):
            raise ValueError("one seed per prompt")
        b = len(prompts)
        if b == 0:
            return GenerationResult([], [])
        width = max(len(p) for p in prompts)
        ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        # one private generator per sample: the draw depends on the seed only, never on the batch
        uniforms = torch.stack(
            [
                torch.rand(max_new_tokens, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
                for s in seeds
            ]
        )
        ids, mask = ids.to(self.device), mask.to(self.device)
        done = torch.zeros(b, dtype=torch.bool, device=self.device)
        out_tok: list[torch.Tensor] = []
        out_lp: list[torch.Tensor] = []
        for t in range(max_new_tokens):
            logits = self.model(ids, mask)[:, -1, :].float()
            logp = torch.log_softmax(logits / self.temperature, dim=-1)
            if greedy:
                nxt = logits.argmax(dim=-1)
            else:
                cdf = logp.double().exp().cumsum(dim=-1).cpu()
                u = uniforms[:, t : t + 1] * cdf[:, -1:]
                nxt = torch.searchsorted(cdf, u).squeeze(1).clamp_max(cdf.shape[1] - 1).to(self.device)
            lp = logp.gather(1, nxt[:, None]).squeeze(1)
            nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
            out_tok.append(nxt)
            out_lp.append(lp)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            mask = torch.cat([mask, (~done).long()[:, None]], dim=1)
            done = done | (nxt == self.eos_id)
            if bool(done.all()):
                break
        toks = torch.stack(out_tok, dim=1).cpu()
        lps = torch.stack(out_lp, dim=1).cpu()
        tokens, logprobs = [], []
        for i in range(b):
            row = toks[i].tolist()
            n = row.index(self.eos_id) + 1 if self.eos_id in row else len(row)
            tokens.append(row[:n])
            logprobs.append(lps[i, :n].tolist())
        return GenerationResult(tokens, logprobs)

    def update_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.model.inner().load_state_dict(state, strict=True)

    def sleep(self) -> None:
        if self.device.type == "cuda":
            self.model.to("cpu")
            torch.cuda.empty_cache()

    def wake(self) -> None:
        if self.device.type == "cuda":
            self.model.to(self.device)

    def shutdown(self) -> None:
        del self.model
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
