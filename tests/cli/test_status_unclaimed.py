"""A run id `shepherd submit` printed is always findable: while its spec waits in the queue (`status` says
whether any daemon is there to claim it), and after the daemon's intake rejected it (`status ID` says so, with
every reason and the error file). The daemon tells the channel of a sweep's rejections in one message."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio
import pytest

from supervisor.cli.main import main
from supervisor.daemon.compose import build
from supervisor.domain.notices import Notice
from supervisor.domain.spec import JobSpec
from supervisor.intake.queue import Intake
from supervisor.lease.files import LeaseFolder
from supervisor.lease.model import LeaseRecord
from supervisor.settings import Settings

GOOD = "name: toy\ncommand: [echo, hi]\n"
REFUSED = "slurm.partition: sbatch --test-only refused it: invalid partition specified: nosuch"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Submit's preflight asks no Slurm here, and sees this machine's disks as shared."""
    for name in list(os.environ):
        if name.upper().startswith("SHEPHERD_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SHEPHERD_PREFLIGHT__TEST_ONLY", "false")
    monkeypatch.setenv("SHEPHERD_PREFLIGHT__SHARED_PATHS", '["/"]')
    monkeypatch.chdir(tmp_path)


def submit(root: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    spec = root.parent / "spec.yaml"
    spec.write_text(text)
    capsys.readouterr()  # what came before (the intake's log lines)
    assert main(["--root", str(root), "submit", str(spec)]) == 0
    return capsys.readouterr().out.strip()


def status(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["--root", str(root), "status", *args]) == 0
    return capsys.readouterr().out


def intake(root: Path, refuse: bool = True) -> Intake:
    """The daemon's intake on `root`, whose own preflight refuses every spec (as sbatch --test-only would)."""
    return Intake(
        root / "queue",
        root / "runs",
        root / "rejected",
        settle_s=0.0,
        preflight=(lambda spec: [REFUSED]) if refuse else None,
    )


def test_a_queued_spec_with_no_daemon_says_no_daemon_has_claimed_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    run = submit(root, GOOD, capsys)

    listing = status(root, capsys)
    assert "queued, not claimed: 1" in listing and "no daemon has claimed them" in listing
    assert run in listing

    detail = status(root, capsys, run)
    assert f"state     UNCLAIMED: queued in {root}/queue/{run}.yaml" in detail
    assert "no daemon holds the lease for this root, so no daemon has claimed it" in detail

    [entry] = json.loads(status(root, capsys, "--json"))
    assert (entry["id"], entry["state"], entry["daemon"]) == (run, "UNCLAIMED", False)


def test_a_queued_spec_with_a_live_daemon_waits_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    run = submit(root, GOOD, capsys)
    now = time.time()
    LeaseFolder(root / "state" / "lease").create(
        LeaseRecord(1, 1, "login1", 4242, "n0", ttl_s=60, renewed_at=now, acquired_at=now)
    )

    detail = json.loads(status(root, capsys, "--json", run))

    assert detail["state"] == "UNCLAIMED" and detail["daemon"] is True
    assert "waiting for the daemon to claim it" in detail["reason"]


def test_a_spec_rejected_at_intake_is_found_by_the_printed_id_with_its_reasons_and_error_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    run = submit(root, GOOD, capsys)
    _, [rejected] = intake(root).scan()
    assert rejected.run_id == run

    detail = status(root, capsys, run)

    assert f"run       {run}" in detail
    assert "state     REJECTED at intake" in detail
    assert f"reasons   {root}/queue/{run}.yaml: {REFUSED}" in detail
    assert f"errors    {root}/rejected/{run}.error.txt" in detail
    assert f"(run {run})" in (root / "rejected" / f"{run}.error.txt").read_text()
    as_json = json.loads(status(root, capsys, "--json", run))
    assert as_json["state"] == "REJECTED"
    assert as_json["reasons"] == [f"{root}/queue/{run}.yaml: {REFUSED}"]
    assert as_json["error_file"] == f"{root}/rejected/{run}.error.txt"


def test_status_lists_recent_rejections_newest_first_beside_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    first = submit(root, GOOD, capsys)
    intake(root).scan()
    second = submit(root, GOOD.replace("toy", "other"), capsys)
    intake(root).scan()
    os.utime(root / "rejected" / f"{first}.error.txt", (time.time() - 60, time.time() - 60))

    listing = status(root, capsys)

    assert "rejected at intake: 2" in listing
    assert listing.index(second) < listing.index(first)
    assert REFUSED in listing
    states = {e["id"]: e["state"] for e in json.loads(status(root, capsys, "--json"))}
    assert states == {first: "REJECTED", second: "REJECTED"}


def test_a_rejection_kept_under_another_name_is_still_found_by_its_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    run = submit(root, GOOD, capsys)
    (root / "rejected").mkdir()
    (root / "rejected" / f"{run}.yaml").write_text("taken")  # the name is taken: kept as <id>-<time>-<hex>
    _, [rejected] = intake(root).scan()
    assert rejected.moved_to.name != f"{run}.yaml"

    detail = json.loads(status(root, capsys, "--json", run))

    assert detail["state"] == "REJECTED" and detail["error_file"] == str(rejected.error_file)


def test_a_spec_dropped_into_the_queue_by_hand_is_found_by_its_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    (root / "queue").mkdir(parents=True)
    (root / "queue" / "mine.yaml").write_text("name: toy\ncommand: [echo]\nslurm: {nodes: lots}\n")
    assert json.loads(status(root, capsys, "--json", "mine"))["state"] == "UNCLAIMED"
    intake(root, refuse=False).scan()

    detail = json.loads(status(root, capsys, "--json", "mine"))

    assert detail["state"] == "REJECTED"
    assert "mine.yaml:3: slurm.nodes: Input should be a valid integer" in detail["reasons"][0]


def test_a_spec_claimed_a_moment_ago_is_not_lost_while_its_row_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    run = submit(root, GOOD, capsys)
    [claimed], _ = intake(root, refuse=False).scan()  # the daemon writes the run's row just after this
    assert claimed.run_id == run

    detail = json.loads(status(root, capsys, "--json", run))

    assert detail["state"] == "CLAIMED" and detail["spec_file"] == f"{root}/runs/{run}/spec.yaml"


def test_an_id_nobody_printed_is_still_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path / "root"), "status", "ghost-20261127-000000-abcd"]) == 1
    assert "no run called 'ghost-20261127-000000-abcd'" in capsys.readouterr().err


class Recorder:
    def __init__(self) -> None:
        self.notices: list[Notice] = []

    def publish(self, notice: Notice) -> None:
        self.notices.append(notice)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        pass


def test_a_thousand_bad_files_are_one_message_to_the_channel(tmp_path: Path) -> None:
    rec = Recorder()
    settings = Settings(root=tmp_path / "root", spec_settle_s=0.0)
    settings.preflight.at_intake = False
    built = build(settings, sinks=[rec])
    for batch in range(4):  # the flood arrives while the intake sweeps
        for i in range(250):
            (settings.queue_dir / f"bad-{batch}{i:03}.yaml").write_text("name: [\n")
        anyio.run(built.daemon.scan_queue)
    (settings.queue_dir / "good.yaml").write_text(GOOD)
    assert not [n for n in rec.notices if n.kind == "rejected"]  # still refusing: nothing told yet

    anyio.run(built.daemon.scan_queue)  # a sweep that refuses nothing more

    [notice] = [n for n in rec.notices if n.kind == "rejected"]
    assert notice.run_id == "shepherd-daemon" and notice.title == "1000 specs rejected at intake"
    assert "bad-0000.yaml: " in notice.text and "… and 990 more" in notice.text
    assert notice.text.count("• ") == 10
    assert [r.name for r in built.store.list_runs()] == ["toy"]  # the good one among them was claimed
    anyio.run(built.daemon.scan_queue)
    assert len([n for n in rec.notices if n.kind == "rejected"]) == 1  # told once


def test_a_steady_trickle_of_bad_files_is_told_every_group_wait(tmp_path: Path) -> None:
    rec = Recorder()
    now = [time.time() + 1]  # every file written below is settled at once
    settings = Settings(root=tmp_path / "root", spec_settle_s=0.0)
    settings.preflight.at_intake = False
    settings.slack.group_wait_s = 10.0
    built = build(settings, sinks=[rec], clock=lambda: now[0])
    for i in range(12):  # one bad file a second, never a quiet sweep
        (settings.queue_dir / f"bad-{i:02}.yaml").write_text("name: [\n")
        anyio.run(built.daemon.scan_queue)
        now[0] += 1.0

    told = [n.title for n in rec.notices if n.kind == "rejected"]

    assert told == ["11 specs rejected at intake"]  # the first 10 s of it, then the next batch waits


def test_a_sweep_with_no_rejection_says_nothing(tmp_path: Path) -> None:
    rec = Recorder()
    settings = Settings(root=tmp_path / "root", spec_settle_s=0.0)
    settings.preflight.at_intake = False
    built = build(settings, sinks=[rec])
    (settings.queue_dir / "good.yaml").write_text(GOOD)
    anyio.run(built.daemon.scan_queue)
    assert not [n for n in rec.notices if n.kind == "rejected"]
    assert JobSpec.model_validate(built.store.list_runs()[0].spec.model_dump()).name == "toy"
