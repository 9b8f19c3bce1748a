"""Policy models: a tiny random transformer built from a config, or a local Hugging Face causal LM.

Both expose forward(input_ids, attention_mask) -> logits and save/load their weights as
safetensors next to a config.json, so a checkpoint's policy/weights is loadable without this code
(HF models, and `tiny-llama`, load with AutoModelForCausalLM or vLLM).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_model, save_model
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """Everything a worker needs to build the same model, picklable for Ray."""

    model_name: str
    vocab_size: int
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 2
    max_seq_len: int = 64
    seed: int = 0


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Left padding shifts tokens right; positions count only real tokens so they match unpadded runs."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


class Block(nn.Module):
    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    """nanoGPT-style pre-LN transformer; head dim >= 32 keeps it loadable by vLLM's paged attention."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.spec = spec
        self.tok = nn.Embedding(spec.vocab_size, spec.d_model)
        self.pos = nn.Embedding(spec.max_seq_len, spec.d_model)
        self.blocks = nn.ModuleList([Block(spec.d_model, spec.n_heads) for _ in range(spec.n_layers)])
        self.ln_f = nn.LayerNorm(spec.d_model)
        self.head = nn.Linear(spec.d_model, spec.vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
        for blk in self.blocks:
            assert isinstance(blk, Block)
            nn.init.normal_(blk.proj.weight, std=0.02 / math.sqrt(2 * spec.n_layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        t = input_ids.shape[1]
        if t > self.spec.max_seq_len:
            raise ValueError(f"sequence length {t} > policy.tiny.max_seq_len {self.spec.max_seq_len}")
        pos = positions_from_mask(attention_mask)
        x = self.tok(input_ids) + self.pos(pos)
        causal = torch.ones(t, t, dtype=torch.bool, device=input_ids.device).tril()
        keys = attention_mask.bool()[:, None, None, :]
        # every position may see itself, so fully padded rows never become softmax(-inf) = NaN
        mask = (causal & keys) | torch.eye(t, dtype=torch.bool, device=input_ids.device)
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.ln_f(x))

    def hf_config(self) -> dict[str, Any]:
        return {"model_type": "shepherd_tiny", **asdict(self.spec)}

    def inner(self) -> nn.Module:
        return self


class HFCausalLM(nn.Module):
    """A Hugging Face causal LM (from a local path, or `tiny-llama` built from a config)."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

        self.spec = spec
        if spec.model_name == "tiny-llama":
            conf = LlamaConfig(
                vocab_size=spec.vocab_size,
                hidden_size=spec.d_model,
                intermediate_size=4 * spec.d_model,
                num_hidden_layers=spec.n_layers,
                num_attention_heads=spec.n_heads,
                num_key_value_heads=spec.n_heads,
                max_position_embeddings=spec.max_seq_len,
                tie_word_embeddings=False,
                bos_token_id=1,
                eos_token_id=2,
                pad_token_id=0,
                # vLLM picks its model class from `architectures`; without it it loads a headless LlamaModel
                architectures=["LlamaForCausalLM"],
            )
            self.model: Any = LlamaForCausalLM(conf)
        else:
            self.model = AutoModelForCausalLM.from_pretrained(
                spec.model_name, local_files_only=True, dtype=dtype
            )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions_from_mask(attention_mask),
            use_cache=False,
        )
        return out.logits  # type: ignore[no-any-return]

    def hf_config(self) -> dict[str, Any]:
        return dict(self.model.config.to_dict())

    def inner(self) -> nn.Module:
        return self.model  # type: ignore[no-any-return]


PolicyModel = TinyCausalLM | HFCausalLM


def build_model(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> PolicyModel:
    """Build with a private RNG so model init never disturbs the global RNG stream (exact resume)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        if spec.model_name == "tiny":
            return TinyCausalLM(spec)
        return HFCausalLM(spec, dtype)


def save_weights(model: PolicyModel, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    save_model(model.inner(), str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(model.hf_config(), indent=2, default=str))


def load_weights(model: PolicyModel, directory: Path) -> None:
    missing, unexpected = load_model(model.inner(), str(directory / "model.safetensors"), strict=True)
    if missing or unexpected:
        raise RuntimeError(
            f"weights in {directory} do not match the model: missing={missing} unexpected={unexpected}"
        )


def weights_for_sync(model: PolicyModel) -> dict[str, torch.Tensor]:
    """Names as the inner model (HF/vLLM) knows them; detached CPU copies safe to ship to another process."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.inner().state_dict().items()}
