"""Message layout: evidence trimmed but kept, nothing in a log can ping a channel."""

from __future__ import annotations

from supervisor.notify.slack import blocks as bk


def test_long_log_excerpt_keeps_its_end_and_fits_a_section() -> None:
    excerpt = (
        "\n".join(f"line {i} " + "x" * 60 for i in range(400))
        + "\ntorch.OutOfMemoryError: CUDA out of memory"
    )
    _, layout = bk.event("gsm8k", "gsm8k-1", "alert", "CUDA OOM", "rule cuda_oom", "error", excerpt=excerpt)
    code = layout[1]["text"]["text"]
    assert code.startswith("```") and code.endswith("```")
    assert "CUDA out of memory" in code  # the matched line survives
    assert "chars trimmed" in code
    assert len(code) <= 2600


def test_log_text_cannot_mention_channel_or_break_out_of_code_block() -> None:
    text, layout = bk.event(
        "r", "r-1", "alert", "<!channel> hi", "see <https://evil|here>", "error", excerpt="``` <!here> &"
    )
    flat = text + str(layout)
    assert "<!channel>" not in flat and "<!here>" not in flat and "<https://evil" not in flat
    assert "&lt;!channel&gt;" in flat
    code = layout[1]["text"]["text"]
    assert code.count("```") == 2


def test_failure_alert_has_the_three_buttons_carrying_the_run_id() -> None:
    _, layout = bk.event("r", "r-20260101-000000-abcd", "alert", "failed", "", "error", buttons=True)
    actions = next(b for b in layout if b["type"] == "actions")
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == [bk.ACTION_RESUME_LATEST, bk.ACTION_GIVE_UP, bk.ACTION_SILENCE_4H]
    assert {e["value"] for e in actions["elements"]} == {"r-20260101-000000-abcd"}
    assert [e["text"]["text"] for e in actions["elements"]] == ["Resume from latest", "Give up", "Silence 4h"]


def test_header_is_clipped_to_slack_limit() -> None:
    _, layout = bk.run_opened("n" * 400, "id", "spec", "123", ["/logs/a.log"])
    assert len(layout[0]["text"]["text"]) <= bk.HEADER_MAX


def test_acting_on_an_alert_removes_its_buttons() -> None:
    _, layout = bk.event("r", "r-1", "alert", "failed", "", "error", buttons=True)
    after = bk.acted(layout, "Resume requested by <@U0ALICE>")
    assert not any(b["type"] == "actions" for b in after)
    assert after[-1]["elements"][0]["text"] == "Resume requested by <@U0ALICE>"


def test_mentions_only_for_well_formed_user_ids() -> None:
    assert bk.mention("U0ALICE") == "<@U0ALICE>"
    assert bk.mention("<!channel>") == ""
    assert bk.mention("U0A|x") == ""
