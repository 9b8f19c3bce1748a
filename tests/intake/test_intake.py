"""The queue folder: good specs are claimed once, bad ones are moved aside with a precise reason."""

import os
from pathlib import Path

import pytest

from supervisor.intake.queue import Intake, is_candidate

GOOD = """\
name: toy
command: ["python", "-m", "trainer", "--config", "examples/toy-grpo.yaml"]
slurm:
  nodes: 1
  cpus: 2
  time: "00:10:00"
"""


@pytest.fixture
def intake(tmp_path: Path) -> Intake:
    for d in ("queue", "runs", "rejected"):
        (tmp_path / d).mkdir()
    return Intake(tmp_path / "queue", tmp_path / "runs", tmp_path / "rejected", max_bytes=4096, settle_s=0.0)


def put(intake: Intake, name: str, text: str | bytes) -> Path:
    p = intake.queue_dir / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def test_a_good_spec_is_claimed_into_its_run_folder(intake: Intake) -> None:
    put(intake, "toy.yaml", GOOD)
    claimed, rejected = intake.scan()
    assert rejected == [] and len(claimed) == 1
    c = claimed[0]
    assert c.spec.name == "toy" and c.spec_path == intake.runs_dir / c.run_id / "spec.yaml"
    assert c.spec_path.read_text() == GOOD
    assert list(intake.queue_dir.iterdir()) == []
    assert intake.scan() == ([], [])  # never twice


def test_a_run_id_chosen_by_shepherd_submit_is_kept(intake: Intake) -> None:
    put(intake, "toy-20261121-101010-abcd.yaml", GOOD)
    [c], _ = intake.scan()
    assert c.run_id == "toy-20261121-101010-abcd"


def test_editor_and_partial_files_are_ignored() -> None:
    for name in (".toy.yaml.swp", "toy.yaml~", "#toy.yaml#", ".hidden.yaml", "toy.yaml.tmp", "notes.txt"):
        assert not is_candidate(name), name
    assert is_candidate("toy.yml")


def test_a_file_still_being_written_waits(tmp_path: Path) -> None:
    for d in ("queue", "runs", "rejected"):
        (tmp_path / d).mkdir()
    slow = Intake(tmp_path / "queue", tmp_path / "runs", tmp_path / "rejected", settle_s=3600)
    (tmp_path / "queue" / "toy.yaml").write_text("name: to")
    assert slow.scan() == ([], [])
    assert (tmp_path / "queue" / "toy.yaml").exists()


BAD_SPECS: list[tuple[str, str | bytes, str]] = [
    ("syntax.yaml", "name: [unclosed\n", "invalid YAML"),
    ("tabs.yaml", "name: x\n\tcommand: y\n", "invalid YAML"),
    ("list.yaml", "- a\n- b\n", "valid dictionary"),
    ("scalar.yaml", "just a string\n", "valid dictionary"),
    ("noname.yaml", "command: [echo]\n", "name: Field required"),
    ("nocmd.yaml", "name: x\n", "command: Field required"),
    ("unknown.yaml", GOOD + "colour: blue\n", "colour: unknown key"),
    ("unknown-nested.yaml", GOOD + "  gpus: 8\n", "slurm.gpus: unknown key"),
    ("badname.yaml", GOOD.replace("name: toy", "name: 'toy run; rm -rf /'"), "name:"),
    ("nodes-type.yaml", GOOD.replace("nodes: 1", "nodes: many"), "slurm.nodes"),
    ("nodes-zero.yaml", GOOD.replace("nodes: 1", "nodes: 0"), "slurm.nodes"),
    ("time.yaml", GOOD.replace('"00:10:00"', "tomorrow"), "slurm.time"),
    ("emptycmd.yaml", "name: x\ncommand: []\n", "command"),
    ("envkey.yaml", GOOD + "env:\n  'BAD KEY': 1\n", "env"),
    ("relpath.yaml", GOOD + "workdir: relative/dir\n", "absolute"),
    ("missing-workdir.yaml", GOOD + "workdir: /nonexistent/shepherd/dir\n", "does not exist"),
    ("reserved.yaml", GOOD + "  extra_args: ['--job-name=evil']\n", "set by shepherd"),
    ("binary.yaml", b"name: x\ncommand: \xff\xfe\n", "not UTF-8"),
    ("empty.yaml", "", "empty file"),
    ("huge.yaml", "name: x\ncommand: [echo]\n" + "#" * 5000 + "\n", "too large"),
    ("resume.yaml", GOOD + "resume:\n  pass_checkpoint: ['--resume']\n", "{checkpoint}"),
]


@pytest.mark.parametrize(("name", "text", "expected"), BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_each_bad_spec_is_rejected_with_a_reason_and_kept(
    intake: Intake, name: str, text: str | bytes, expected: str
) -> None:
    put(intake, name, text)
    put(intake, "good.yaml", GOOD)
    claimed, rejected = intake.scan()
    assert [c.spec.name for c in claimed] == ["toy"]  # the good one is not disturbed
    [r] = rejected
    assert r.moved_to.read_bytes() == (text if isinstance(text, bytes) else text.encode())
    note = r.moved_to.with_suffix(".error.txt").read_text()
    assert expected in note, note


def test_errors_name_the_line(intake: Intake) -> None:
    put(intake, "unknown.yaml", GOOD + "colour: blue\n")
    _, [r] = intake.scan()
    assert f"unknown.yaml:{GOOD.count(chr(10)) + 1}: colour" in r.errors[0]


def test_a_symlink_is_rejected_and_its_target_untouched(intake: Intake, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(GOOD)
    os.symlink(outside, intake.queue_dir / "link.yaml")
    _, [r] = intake.scan()
    assert "symbolic link" in r.errors[0]
    assert outside.read_text() == GOOD


def test_a_foreign_owner_is_rejected(intake: Intake) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to chown a file to another user")
    p = put(intake, "foreign.yaml", GOOD)
    os.chown(p, 12345, 12345)
    _, [r] = intake.scan()
    assert "owned by uid 12345" in r.errors[0]


def test_two_rejections_with_the_same_name_both_survive(intake: Intake) -> None:
    put(intake, "bad.yaml", "name: [")
    intake.scan()
    put(intake, "bad.yaml", "name: ]")
    intake.scan()
    kept = sorted(p.name for p in intake.rejected_dir.iterdir() if p.suffix == ".yaml")
    assert len(kept) == 2


class NotLeader(Exception):
    pass


def test_a_daemon_that_lost_its_lease_neither_claims_nor_rejects_a_spec(tmp_path: Path) -> None:
    for d in ("queue", "runs", "rejected"):
        (tmp_path / d).mkdir()

    def lapsed() -> None:
        raise NotLeader("the lease lapsed (not renewed for 5.0 s)")

    intake = Intake(tmp_path / "queue", tmp_path / "runs", tmp_path / "rejected", settle_s=0.0, guard=lapsed)
    put(intake, "toy.yaml", GOOD)
    put(intake, "bad.yaml", "name: [not, a, name]\n")
    with pytest.raises(NotLeader):
        intake.scan()
    # both left for the leader
    assert sorted(p.name for p in intake.queue_dir.iterdir()) == ["bad.yaml", "toy.yaml"]
    assert list(intake.runs_dir.iterdir()) == [] and list(intake.rejected_dir.iterdir()) == []
