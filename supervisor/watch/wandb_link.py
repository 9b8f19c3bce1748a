"""The run's Weights & Biases page, read from the line wandb prints when a run starts (and again at its end),
so the run's thread and `shepherd status` can link to it.

What wandb prints (its terminal printer; the name may be coloured, the URL an OSC 8 hyperlink):

    wandb:  View run at https://wandb.ai/team/proj/runs/mey3t37m          (0.12 to 0.15)
    wandb: 🚀 View run at https://wandb.ai/team/proj/runs/mey3t37m        (0.15, 0.16)
    wandb: 🚀 View run gentle-sun-3 at: https://wandb.ai/team/proj/runs/x (0.16 on, and in its footer)
    wandb: Synced gentle-sun-3: https://wandb.ai/team/proj/runs/x        (older footers)

A self-hosted server's URL is kept as it is. The project and sweep lines name no run and are ignored.
"""

from __future__ import annotations

import re

# CSI (colours) and OSC (an OSC 8 hyperlink's target: its visible text is the URL again) escapes.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_LINE = re.compile(r"wandb:.*?(?:View run\b|Synced\b)")
_URL = re.compile(r"https?://[^\s<>\"'`|]+/runs/[^\s<>\"'`|]+")
MAX_URL_CHARS = 500


def wandb_run_url(line: str) -> str | None:
    """The run page's URL from one of wandb's `View run` / `Synced` lines, else None."""
    if "wandb" not in line:
        return None
    text = _ESCAPES.sub("", line)
    if not _LINE.search(text):
        return None
    m = _URL.search(text)
    if m is None:
        return None
    url = m.group(0).rstrip(".,;:)]")
    return url if len(url) <= MAX_URL_CHARS else None
