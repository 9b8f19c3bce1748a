"""Tokenizers: an offline character tokenizer for toy tasks, and a thin wrapper over a local HF tokenizer.

Why our own char tokenizer: toy runs and tests must never download anything, and a tiny
vocabulary gives a random policy some reward to start from.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any, Protocol

PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " \n"


class Tokenizer(Protocol):
    pad_id: int
    eos_id: int
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    def save(self, directory: Path) -> None: ...


class CharTokenizer:
    """<pad>=0, <bos>=1, <eos>=2, then one id per character."""

    SPECIALS = ("<pad>", "<bos>", "<eos>")

    def __init__(self, chars: str) -> None:
        if len(set(chars)) != len(chars):
            raise ValueError("duplicate characters in the char tokenizer alphabet")
        self.chars = chars
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2
        self._to_id = {c: i + len(self.SPECIALS) for i, c in enumerate(chars)}
        self.vocab_size = len(chars) + len(self.SPECIALS)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.bos_id] + [self._to_id[c] for c in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the tokenizer alphabet") from None

    def decode(self, ids: list[int]) -> str:
        out = []
        for i in ids:
            if i == self.eos_id:
                break
            if i >= len(self.SPECIALS):
                out.append(self.chars[i - len(self.SPECIALS)])
        return "".join(out)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tokenizer.json").write_text(json.dumps({"type": "char", "chars": self.chars}))


class HFTokenizer:
    """A local Hugging Face tokenizer (never downloaded: local_files_only)."""

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        self.tok: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.eos_id = int(self.tok.eos_token_id)
        self.pad_id = int(self.tok.pad_token_id if self.tok.pad_token_id is not None else self.eos_id)
        self.vocab_size = len(self.tok)

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=True)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return str(self.tok.decode(ids, skip_special_tokens=True))

    def save(self, directory: Path) -> None:
        self.tok.save_pretrained(str(directory))


def load_tokenizer(path: Path) -> CharTokenizer | None:
    """Reload a saved char tokenizer (HF ones are reloaded with HFTokenizer)."""
    f = path / "tokenizer.json"
    if not f.exists():
        return None
    data = json.loads(f.read_text())
    return CharTokenizer(data["chars"]) if data.get("type") == "char" else None
