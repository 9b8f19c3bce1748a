"""A queue flooded with hostile specs: each is moved to rejected/ with its reason, quickly and with bounded
memory, and a good spec among them is still claimed. A spec whose rules file the linear-time engine
refuses is rejected at intake with that file's line, not found out once its job runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.intake.queue import Intake
from supervisor.rules.loader import spec_rules_problems

pytestmark = pytest.mark.timeout(120)  # a regression must fail, not eat CI's memory

GOOD = 'name: good\ncommand: ["true"]\n'
EVIL_RULES = """\
version: 1
rules:
  - name: evil
    trigger:
      kind: log
      regex: "(a|aa)+$X"
    actions: [cancel]
"""


def billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join([*lines, "name: laughs", "command: *h"]) + "\n"


def hostile_specs(tmp_path: Path) -> list[str]:
    evil = tmp_path / "evil.yaml"
    evil.write_text(EVIL_RULES)
    return [
        billion_laughs(),
        "name: deep\ncommand: " + "[" * 5000 + "]" * 5000 + "\n",
        "name: cyc\ncommand: &x [a, *x]\n",
        "name: big\ncommand: [a]\nslurm: {nodes: " + "9" * 5000 + "}\n",
        f'name: evilrules\ncommand: ["true"]\nrules: {{files: [{json.dumps(str(evil))}]}}\n',
        "\x8d",
    ]


@pytest.fixture
def intake(tmp_path: Path) -> Intake:
    for d in ("queue", "runs", "rejected"):
        (tmp_path / d).mkdir()
    return Intake(
        tmp_path / "queue",
        tmp_path / "runs",
        tmp_path / "rejected",
        settle_s=0.0,
        check_spec=spec_rules_problems,
    )


def test_each_hostile_spec_is_rejected_with_its_reason(intake: Intake, tmp_path: Path) -> None:
    for i, text in enumerate(hostile_specs(tmp_path)):
        (intake.queue_dir / f"h{i}.yaml").write_text(text)
    claimed, rejected = intake.scan()
    assert claimed == []
    reasons = {r.source.name: " ".join(r.errors) for r in rejected}
    assert "once its aliases are expanded" in reasons["h0.yaml"]
    assert "nested deeper than" in reasons["h1.yaml"]
    assert "cycle" in reasons["h2.yaml"]
    assert "invalid YAML value" in reasons["h3.yaml"]
    assert "evil.yaml:6: rules.0.trigger.regex: invalid regex" in reasons["h4.yaml"]
    assert "invalid YAML" in reasons["h5.yaml"]
    for r in rejected:
        assert r.moved_to.exists() and r.moved_to.with_suffix(".error.txt").exists()


def test_a_thousand_hostile_specs_are_all_refused_and_the_good_one_claimed(
    intake: Intake, tmp_path: Path
) -> None:
    kinds = hostile_specs(tmp_path)
    for i in range(1000):
        (intake.queue_dir / f"flood-{i:04d}.yaml").write_text(kinds[i % len(kinds)])
    (intake.queue_dir / "zz-good.yaml").write_text(GOOD)
    claimed, rejected = intake.scan()
    assert [c.spec.name for c in claimed] == ["good"]
    assert len(rejected) == 1000
    assert all(r.errors for r in rejected)
    assert not list(intake.queue_dir.iterdir())
