"""Check the cache directories before Ray starts: a read-only or missing HF_HOME fails late and obscurely.

(NeMo RL's run_config.yaml error is exactly this: a conversion cache on a disk other nodes don't see.)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

CACHE_VARS = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "TRANSFORMERS_CACHE",
    "TORCH_HOME",
    "TRITON_CACHE_DIR",
    "VLLM_CACHE_ROOT",
    "XDG_CACHE_HOME",
    "NRL_MEGATRON_CHECKPOINT_DIR",
    "RAY_TMPDIR",
)


@dataclass(frozen=True)
class CacheCheck:
    name: str
    path: str
    ok: bool
    reason: str


def probe_writable(path: Path) -> str | None:
    """None when writable, else why not (actually creates and deletes a file: permissions lie on NFS)."""
    if not path.exists():
        return "does not exist"
    if not path.is_dir():
        return "is not a directory"
    try:
        fd, name = tempfile.mkstemp(prefix=".shepherd-probe-", dir=path)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        return f"not writable ({e.strerror})"
    return None


def check_caches(
    env: Mapping[str, str],
    extra: list[str] | tuple[str, ...] = (),
    probe: Callable[[Path], str | None] = probe_writable,
) -> list[CacheCheck]:
    """One result per configured cache dir (the env vars that are set, plus extra paths)."""
    items = [(name, env[name]) for name in CACHE_VARS if env.get(name)]
    items += [(f"cache_hygiene.extra_dirs[{i}]", p) for i, p in enumerate(extra)]
    out = []
    for name, raw in items:
        why = probe(Path(os.path.expanduser(raw)))
        out.append(CacheCheck(name, raw, why is None, why or "ok"))
    return out
