"""Each doctor check made to fail once on made-up probe results, and passing on good ones."""

from __future__ import annotations

import json

import pytest

from supervisor.doctor import checks
from supervisor.doctor.checks import Finding

ALL = dict.fromkeys(checks.SLURM_COMMANDS, "/usr/bin/x")

FAILING = [
    checks.slurm_commands({**ALL, "sacct": None}, None),
    checks.controller(False, "slurm_load_jobs error: Unable to contact slurm controller"),
    checks.accounting(False, False, "sacct: error: slurmdbd: Connection refused"),
    checks.munge(False, "munge -n failed: Failed to access socket"),
    checks.filesystem("state", "/dev/shm/s", "tmpfs", shared=False, volatile=True),
    checks.permissions("/r/queue is writable by group", "/r"),
    checks.slack("socket", False, "auth.test refused the token: invalid_auth"),
    checks.disk(10_000, "/r", 1_000_000_000),
    checks.clock_skew(42.0, "", 5.0),
]
WARNING = [
    checks.accounting(True, True, ""),
    checks.filesystem("state", "/var/tmp/s", "ext4", shared=False, volatile=False),
    checks.systemd(user_manager=False, linger=None),
    checks.systemd(user_manager=True, linger=False),
]
PASSING = [
    checks.slurm_commands(ALL, "slurm 23.11.4"),
    checks.controller(True, "Slurmctld(primary) at ctl is UP"),
    checks.accounting(True, False, "sacct answers"),
    checks.munge(True, "ok"),
    checks.filesystem("state", "/home/u/shepherd/state", "nfs4", shared=True, volatile=False),
    checks.permissions(None, "/r"),
    checks.watching({"/home/u/q": "poll", "/tmp/q": "inotify"}),
    checks.slack("socket", True, "auth.test ok"),
    checks.systemd(user_manager=True, linger=True),
    checks.disk(5_000_000_000, "/r", 1_000_000_000),
    checks.clock_skew(0.4, "", 5.0),
]


@pytest.mark.parametrize("finding", FAILING, ids=lambda f: f.check)
def test_each_check_fails_with_a_fix(finding: Finding) -> None:
    assert finding.status == "fail" and finding.fix and finding.detail


@pytest.mark.parametrize("finding", WARNING, ids=lambda f: f.check)
def test_what_works_but_is_fragile_warns_with_a_fix(finding: Finding) -> None:
    assert finding.status == "warn" and finding.fix


@pytest.mark.parametrize("finding", PASSING, ids=lambda f: f.check)
def test_a_healthy_environment_passes(finding: Finding) -> None:
    assert finding.status == "ok"


def test_the_state_on_a_network_filesystem_names_its_journal_and_polling_is_explained() -> None:
    assert "rollback journal" in checks.filesystem("state", "/h", "nfs4", True, False).detail
    assert "inotify does not see" in checks.watching({"/h/q": "poll"}).detail


def test_the_table_shows_fixes_only_for_problems_and_json_has_every_field() -> None:
    text = checks.table([*PASSING[:2], FAILING[1]])
    assert text.count("fix:") == 1 and "controller" in text
    data = json.loads(checks.as_json(FAILING))
    assert {tuple(sorted(d)) for d in data} == {("check", "detail", "fix", "status")}
