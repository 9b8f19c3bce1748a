"""Where a notice goes and in what form (notify/routing.py): pure, no SQLite, no Slack."""

from __future__ import annotations

import pytest

from supervisor.domain.spec import NotifySpec
from supervisor.notify.routing import IncidentView, Route, ThreadTarget, held_back, route, thread_target

WAITING = IncidentView(posted=False)
POSTED = IncidentView(posted=True)


def test_a_runs_own_channel_and_a_non_default_level_route_its_thread() -> None:
    assert thread_target(NotifySpec(slack_channel="#rl", level="warning")) == ThreadTarget("#rl", "warning")
    assert thread_target(NotifySpec(slack_channel="#rl")) == ThreadTarget("#rl", None)  # info: the operator's
    assert thread_target(None) == ThreadTarget()


def test_notices_below_the_threads_level_or_silenced_are_held_back_but_completion_never_is() -> None:
    assert held_back("alert", "info", "warning", silenced=False) == "below the thread's level"
    assert held_back("alert", "error", "warning", silenced=True) == "silenced"
    assert held_back("alert", "error", "warning", silenced=False) is None
    for kind in ("completed", "gave_up", "opened", "command"):
        assert held_back(kind, "info", "error", silenced=True) is None


def test_the_first_alert_opens_an_incident_that_waits_unless_there_is_no_group_wait() -> None:
    assert route("alert", None, group_wait_s=10) == Route("open_incident", post_now=False)
    assert route("alert", None, group_wait_s=0) == Route("open_incident", post_now=True)


@pytest.mark.parametrize("incident", [WAITING, POSTED])
def test_later_alerts_and_related_events_fold_into_the_open_incident(incident: IncidentView) -> None:
    assert route("alert", incident, group_wait_s=10).kind == "fold"
    assert route("related", incident, group_wait_s=10).kind == "fold"


def test_a_decision_becomes_the_incidents_headline_and_goes_out_at_once() -> None:
    assert route("resumed", None, group_wait_s=10) == Route("headline", post_now=True, promote=False)
    assert route("gave_up", WAITING, group_wait_s=10) == Route("headline", post_now=True, promote=True)


def test_a_decision_after_the_incident_went_out_is_its_own_message_counted_in_the_incident() -> None:
    assert route("resumed", POSTED, group_wait_s=10) == Route("post", after="count")


def test_other_messages_flush_a_waiting_incident_first_so_the_thread_stays_in_order() -> None:
    assert route("submitted", WAITING, group_wait_s=10) == Route("post", flush_waiting=True)
    assert route("submitted", None, group_wait_s=10) == Route("post")


def test_completion_resolves_the_incident_and_a_running_attempt_starts_its_recovery() -> None:
    assert route("completed", POSTED, group_wait_s=10).after == "resolve"
    assert route("recovered", POSTED, group_wait_s=10).after == "resolve"
    assert route("started", POSTED, group_wait_s=10).after == "recovering"
