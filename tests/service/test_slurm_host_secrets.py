"""A Slurm-hosted daemon's job carries its settings but no token (slurmctld keeps a job's environment): its
Slack tokens come from a private token file, and `service install --slurm` refuses to host a daemon that
would have none."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.domain.envfiles import EnvFileError
from supervisor.service.slurm_host import SlurmHosting, hosted_environment, hosting_problem, render_script
from supervisor.settings import SlackSettings

BOT, APP = "xoxb-1111-2222-hosttoken", "xapp-1-A0HOST-3333-hostapptoken"
SHELL = {
    "PATH": "/usr/bin",
    "SLACK_BOT_TOKEN": BOT,
    "SLACK_APP_TOKEN": APP,
    "SHEPHERD_SLACK__MODE": "socket",
    "SHEPHERD_SLACK__CHANNEL": "C0123",
    "SHEPHERD_SLACK__BOT_TOKEN": BOT,
    "SHEPHERD_SLACK__WEBHOOK_URL": "https://hooks.slack.com/services/T/B/x",
    "SHEPHERD_LEASE__TTL_S": "20",
    "SHEPHERD_EXTRA": f"echo {APP}",
    "SHEPHERD_SLACK__TOKEN_FILE": "/home/me/.config/shepherd/slack.env",
    "SHEPHERD_SLACK__BOT_TOKEN_ENV": "MY_BOT",
    "SHEPHERD_DB_PASSWORD": "hunter2-hunter2",
}


def token_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    f = tmp_path / "slack.env"
    f.write_text(text)
    f.chmod(mode)
    return f


def test_the_daemons_job_gets_its_settings_and_no_token() -> None:
    env = hosted_environment(SHELL, SlackSettings(mode="socket"))
    assert env == {
        "SHEPHERD_SLACK__MODE": "socket",
        "SHEPHERD_SLACK__CHANNEL": "C0123",
        "SHEPHERD_LEASE__TTL_S": "20",
        "SHEPHERD_SLACK__TOKEN_FILE": "/home/me/.config/shepherd/slack.env",  # where, not what
        "SHEPHERD_SLACK__BOT_TOKEN_ENV": "MY_BOT",
    }


def test_the_job_script_carries_no_token(tmp_path: Path) -> None:
    text = render_script(Path("/opt/shepherd"), tmp_path, tmp_path / "s.sbatch", SlurmHosting())
    assert BOT not in text and APP not in text and "TOKEN" not in text


def test_tokens_only_in_the_environment_are_refused_with_the_way_out(tmp_path: Path) -> None:
    problem = hosting_problem(SlackSettings(mode="socket"), SHELL)
    assert problem is not None
    assert "gets no SLACK_BOT_TOKEN, SLACK_APP_TOKEN from this shell" in problem and "token_file" in problem
    assert BOT not in problem and APP not in problem
    assert hosting_problem(SlackSettings(mode="off"), SHELL) is None


def test_a_private_token_file_is_where_the_daemon_reads_its_tokens(tmp_path: Path) -> None:
    f = token_file(tmp_path, f"SLACK_BOT_TOKEN={BOT}\nSLACK_APP_TOKEN={APP}\n")
    slack = SlackSettings(mode="socket", token_file=f)
    assert hosting_problem(slack, SHELL) is None
    assert slack.resolved_bot_token({}) == BOT and slack.resolved_app_token({}) == APP
    assert slack.resolved_bot_token({"SLACK_BOT_TOKEN": "xoxb-other"}) == BOT  # the file first


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    f = token_file(tmp_path, f"SLACK_BOT_TOKEN={BOT}\n", mode=0o644)
    slack = SlackSettings(mode="socket", token_file=f)
    problem = hosting_problem(slack, {})
    assert problem is not None and problem.startswith("slack.token_file: ") and "chmod 600" in problem
    with pytest.raises(EnvFileError, match="mode 644"):
        slack.resolved_bot_token({})
