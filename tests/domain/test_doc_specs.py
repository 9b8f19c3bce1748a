"""Every spec the docs show is one the daemon accepts: a user copies them first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec, load_spec
from supervisor.slurm.command import driver_command

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)
SPECS = [
    (f"{doc.name}#{i}", text)
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for i, text in enumerate(BLOCK.findall(doc.read_text()))
    if re.search(r"^name: ", text, re.M) and re.search(r"^command:", text, re.M)
]


@pytest.mark.parametrize("text", [t for _, t in SPECS], ids=[n for n, _ in SPECS])
def test_a_spec_in_the_docs_is_valid(text: str, tmp_path: Path) -> None:
    spec = load_spec(tmp_path / "doc.yaml", text)
    assert isinstance(spec, JobSpec)


def test_the_nemo_rl_examples_are_there_and_get_their_save_deadline() -> None:
    nemo = [text for _, text in SPECS if re.search(r"^launcher: {kind: nemo-rl", text, re.M)]
    assert len(nemo) >= 2  # docs/nemo-rl.md and docs/specs.md
    for text in nemo:
        spec = load_spec(Path("doc.yaml"), text)
        command = driver_command(spec, AttemptOverrides())
        assert isinstance(command, str)
        assert command.endswith("checkpointing.checkpoint_must_save_by=00:03:50:00")
