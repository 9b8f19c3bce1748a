"""The command parser and the authorisation rule: typed output only, deny by default."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.notify.slack import blocks
from supervisor.notify.slack import commands as c

POLICY = c.AuthPolicy.of(actors={"U0ALICE"}, status_readers={"U0CAROL"})


@pytest.mark.parametrize(
    ("command", "text", "expected"),
    [
        ("/resume", "gsm8k-a", c.Resume("gsm8k-a", "latest")),
        ("/resume", "gsm8k-a best", c.Resume("gsm8k-a", "best")),
        ("/resume", "  gsm8k-a   STEP_1200 ", c.Resume("gsm8k-a", "step_1200")),
        ("/status", "", c.Status(None)),
        ("/status", "gsm8k-a", c.Status("gsm8k-a")),
        ("/cancel", "gsm8k-a", c.Cancel("gsm8k-a")),
        ("/hold", "gsm8k-a", c.Hold("gsm8k-a")),
        ("/release", "gsm8k-a", c.Release("gsm8k-a")),
        ("/help", "", c.Help()),
        ("/shepherd", "", c.Help()),
        ("/shepherd", "resume gsm8k-a step_5", c.Resume("gsm8k-a", "step_5")),
        ("/shepherd", "silence gsm8k-a 4h", c.Silence("gsm8k-a", 4 * 3600.0)),
        ("/shepherd", "silence rule:nccl_timeout 1h30m", c.Silence("rule:nccl_timeout", 5400.0)),
        ("/shepherd", "give_up gsm8k-a", c.GiveUp("gsm8k-a")),
        ("/shepherd", "plot gsm8k-a", c.Plot("gsm8k-a")),
        ("/shepherd", "  PLOT   gsm8k-a-20261121-000000-abcd ", c.Plot("gsm8k-a-20261121-000000-abcd")),
        ("/shepherd", "report gsm8k-a", c.Report("gsm8k-a")),
        ("/report", "gsm8k-a", c.Report("gsm8k-a")),
    ],
)
def test_well_formed_commands_parse_to_typed_commands(command: str, text: str, expected: c.Command) -> None:
    assert c.parse_slash(command, text) == expected


@pytest.mark.parametrize(
    ("command", "text", "says"),
    [
        ("/resume", "", "usage"),
        ("/resume", "gsm8k-a newest", "checkpoint must be"),
        ("/resume", "gsm8k-a step_", "checkpoint must be"),
        ("/resume", "gsm8k-a;scancel", "not a run name"),
        ("/resume", "gsm8k-a;scancel -u all", "usage"),
        ("/resume", "gsm8k-a --wrap=sh", "checkpoint must be"),
        ("/resume", "--dependency=afterok:1", "not a run name"),
        ("/cancel", "a b", "usage"),
        ("/cancel", "$(id)", "not a run name"),
        ("/shepherd", "silence gsm8k-a forever", "duration"),
        ("/shepherd", "silence gsm8k-a 99d", "duration"),
        ("/shepherd", "rm -rf", "unknown command"),
        ("/shepherd", "plot", "usage: `/shepherd plot <run>`"),
        ("/shepherd", "plot a b", "usage: `/shepherd plot <run>`"),
        ("/shepherd", "plot $(id)", "not a run name"),
        ("/shepherd", "plot ../../etc/passwd", "not a run name"),
        ("/shepherd", "report", "usage: `/shepherd report <run>`"),
        ("/shepherd", "report a --since 2026", "usage: `/shepherd report <run>`"),
        ("/shepherd", "report $(id)", "not a run name"),
        ("/deploy", "prod", "unknown command"),
    ],
)
def test_bad_input_gets_a_clear_answer_not_a_command(command: str, text: str, says: str) -> None:
    result = c.parse_slash(command, text)
    assert isinstance(result, c.ParseError)
    assert says in result.message


def test_buttons_parse_to_the_same_commands_as_typing_them() -> None:
    assert c.parse_action(blocks.ACTION_RESUME_LATEST, "gsm8k-a") == c.parse_slash(
        "/resume", "gsm8k-a latest"
    )
    assert c.parse_action(blocks.ACTION_GIVE_UP, "gsm8k-a") == c.parse_slash("/shepherd", "give_up gsm8k-a")
    assert c.parse_action(blocks.ACTION_SILENCE_4H, "gsm8k-a") == c.parse_slash(
        "/shepherd", "silence gsm8k-a 4h"
    )
    assert isinstance(c.parse_action("shepherd_delete_everything", "gsm8k-a"), c.ParseError)
    assert isinstance(c.parse_action(blocks.ACTION_GIVE_UP, "a b"), c.ParseError)


def test_only_listed_users_may_act_and_status_is_wider() -> None:
    resume = c.Resume("gsm8k-a")
    assert c.authorise(resume, "U0ALICE", "C1", POLICY).allowed
    refused = c.authorise(resume, "U0BOB", "C1", POLICY)
    assert not refused.allowed and refused.reason == "not_authorised" and "Sorry" in refused.message
    assert not c.authorise(resume, "U0CAROL", "C1", POLICY).allowed  # status readers can't act
    assert c.authorise(c.Status(None), "U0CAROL", "C1", POLICY).allowed
    assert not c.authorise(c.Status(None), "U0BOB", "C1", POLICY).allowed
    assert c.authorise(c.Status(None), "U0BOB", "C1", c.AuthPolicy.of({"U0ALICE"}, (), {"*"})).allowed
    assert c.authorise(c.Help(), "U0BOB", None, POLICY).allowed


def test_plot_only_looks_so_it_is_open_to_the_status_readers() -> None:
    plot = c.Plot("gsm8k-a")
    assert c.authorise(plot, "U0ALICE", "C1", POLICY).allowed
    assert c.authorise(plot, "U0CAROL", "C1", POLICY).allowed
    refused = c.authorise(plot, "U0BOB", "C1", POLICY)
    assert not refused.allowed and refused.reason == "not_authorised" and "Sorry" in refused.message
    assert c.authorise(plot, "U0BOB", "C1", c.AuthPolicy.of({"U0ALICE"}, (), {"*"})).allowed
    # like /status, not bound to the ops channels: looking is harmless anywhere
    assert c.authorise(plot, "U0ALICE", "C0RANDOM", c.AuthPolicy.of({"U0ALICE"}, {"C0OPS"})).allowed
    assert c.action_name(plot) == "plot" and c.command_run(plot) == "gsm8k-a"
    assert "/shepherd plot <run>" in c.HELP_TEXT


def test_report_only_looks_so_it_is_open_to_the_status_readers() -> None:
    report = c.Report("gsm8k-a")
    assert c.authorise(report, "U0CAROL", "C1", POLICY).allowed
    assert not c.authorise(report, "U0BOB", "C1", POLICY).allowed
    assert c.action_name(report) == "report" and c.command_run(report) == "gsm8k-a"
    assert "/shepherd report <run>" in c.HELP_TEXT


def test_channel_allow_list_restricts_where_actions_are_accepted() -> None:
    policy = c.AuthPolicy.of(actors={"U0ALICE"}, channels={"C0OPS"})
    assert c.authorise(c.Cancel("x"), "U0ALICE", "C0OPS", policy).allowed
    assert c.authorise(c.Cancel("x"), "U0ALICE", "C0RANDOM", policy).reason == "wrong_channel"
    assert c.authorise(c.Cancel("x"), "U0ALICE", None, policy).reason == "wrong_channel"


def test_a_wildcard_or_empty_id_never_counts_as_an_actor() -> None:
    policy = c.AuthPolicy.of(actors={"*", "", "U0ALICE"})
    assert not c.authorise(c.Cancel("x"), "*", "C1", policy).allowed
    assert not c.authorise(c.Cancel("x"), "", "C1", policy).allowed


def _field_values(cmd: c.Command) -> list[object]:
    return [getattr(cmd, f.name) for f in dataclasses.fields(cmd)]


hostile = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(
            [
                "resume",
                "status",
                "cancel",
                "hold",
                "release",
                "silence",
                "give_up",
                "plot",
                "report",
                "help",
                "latest",
                "best",
                "step_12",
                "4h",
                "rule:x",
                "gsm8k-a",
                ";",
                "&&",
                "|",
                "$(id)",
                "`id`",
                "--wrap=sh",
                "\n",
                "\x00",
                "-",
                "..",
                "../../etc/passwd",
                "<!channel>",
                "'",
                '"',
                "*",
                "%s",
                "step_99999999999999",
            ]
        ),
        max_size=6,
    ).map(" ".join),
)


@settings(max_examples=600, deadline=None)
@given(
    command=st.sampled_from(
        ["/resume", "/status", "/cancel", "/hold", "/release", "/help", "/shepherd", "/x"]
    ),
    text=hostile,
    user=st.sampled_from(["U0ALICE", "U0BOB", "U0CAROL", "", "*", "u0alice", "U0ALICE "]),
)
def test_fuzz_parser_is_total_typed_and_never_lets_a_stranger_act(command: str, text: str, user: str) -> None:
    result = c.parse_slash(command, text)
    assert isinstance(result, c.ParseError | c.Command)
    if isinstance(result, c.ParseError):
        return
    # Every string that could reach Slurm is a plain run name or checkpoint: no spaces, quotes or options.
    for value in _field_values(result):
        if isinstance(value, str):
            assert c.RUN_REF_RE.fullmatch(value) or c.RULE_REF_RE.fullmatch(value), value
            assert not value.startswith("-")
    if isinstance(result, c.Resume):
        assert c.CHECKPOINT_RE.fullmatch(result.checkpoint)
    verdict = c.authorise(result, user, "C1", POLICY)
    if verdict.allowed and not isinstance(result, c.Help | c.Status | c.Plot):
        assert user == "U0ALICE"
    if verdict.allowed and isinstance(result, c.Status | c.Plot):
        assert user in ("U0ALICE", "U0CAROL")


@settings(max_examples=300, deadline=None)
@given(action_id=st.text(max_size=40) | st.sampled_from(blocks.BUTTON_ACTIONS), value=st.text(max_size=120))
def test_fuzz_button_payloads_are_typed_or_refused(action_id: str, value: str) -> None:
    result = c.parse_action(action_id, value)
    if not isinstance(result, c.ParseError):
        assert action_id in blocks.BUTTON_ACTIONS
        assert c.RUN_REF_RE.fullmatch(c.command_run(result) or "")


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90.0), ("30m", 1800.0), ("4h", 14400.0), ("1d", 86400.0), ("1h30m", 5400.0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert c.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "4", "h", "4x", "-4h", "4h 30m", "0m", "31d", "4h4"])
def test_bad_durations(text: str) -> None:
    assert c.parse_duration(text) is None
