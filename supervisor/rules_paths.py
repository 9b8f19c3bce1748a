"""Where the shipped rules live: `rules/` beside the package (a checkout or an editable install)."""

from __future__ import annotations

from pathlib import Path

REPO_RULES = Path(__file__).resolve().parents[1] / "rules"


def default_rules_file() -> Path:
    return REPO_RULES / "default.yaml"
