"""Block Kit layout for run threads. Pure: text in, JSON-able dicts out.

Everything that came from a log, a spec or a user is escaped (``&<>``) so a log line
saying ``<!channel>`` can't ping a whole channel, and trimmed below Slack's limits
(header 150 chars, section 3000 chars).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

Block = dict[str, Any]

_USER_ID_RE = re.compile(r"[UW][A-Z0-9]{2,30}")

HEADER_MAX = 150
SECTION_MAX = 3000
FALLBACK_MAX = 3000

ACTION_RESUME_LATEST = "shepherd_resume_latest"
ACTION_GIVE_UP = "shepherd_give_up"
ACTION_SILENCE_4H = "shepherd_silence_4h"
BUTTON_ACTIONS = (ACTION_RESUME_LATEST, ACTION_GIVE_UP, ACTION_SILENCE_4H)

_LEVEL_EMOJI = {"debug": ":mag:", "info": ":information_source:", "warning": ":warning:", "error": ":x:"}
_KIND_EMOJI = {
    "opened": ":sheep:",
    "started": ":arrow_forward:",
    "resumed": ":repeat:",
    "hop": ":fast_forward:",
    "alert": ":rotating_light:",
    "completed": ":white_check_mark:",
    "gave_up": ":headstone:",
    "command": ":speech_balloon:",
    "digest": ":zipper_mouth_face:",
}


def escape(text: str) -> str:
    """Slack's mrkdwn control characters; without this `<!here>` in a log pings people."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mention(user_id: str) -> str:
    """`<@U123>` for a well-formed user id, else empty (never a raw string inside `<...>`)."""
    return f"<@{user_id}>" if _USER_ID_RE.fullmatch(user_id) else ""


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def trim_excerpt(text: str, limit: int = 2500) -> str:
    """Keep the *end* of a log excerpt: the matched lines and the traceback's last frames are there."""
    text = text.replace("```", "`\u200b``")
    if len(text) <= limit:
        return text
    tail = text[-(limit - 40) :]
    cut = tail.find("\n")
    if 0 <= cut < 200:
        tail = tail[cut + 1 :]
    dropped = len(text) - len(tail)
    return f"[… {dropped} chars trimmed …]\n{tail}"


def emoji_for(kind: str, level: str) -> str:
    return _KIND_EMOJI.get(kind) or _LEVEL_EMOJI.get(level, ":information_source:")


def _header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, HEADER_MAX), "emoji": True}}


def _section(mrkdwn: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(mrkdwn, SECTION_MAX)}}


def _context(mrkdwn: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(mrkdwn, SECTION_MAX)}]}


def run_opened(
    run_name: str, run_id: str, spec_summary: str, job_id: str | None, log_paths: Sequence[str]
) -> tuple[str, list[Block]]:
    """The thread's first message: what runs, where, and where to look."""
    text = escape(f"Run {run_name} ({run_id}) submitted" + (f" as Slurm job {job_id}" if job_id else ""))
    fields = [f"*Run:* `{escape(run_id)}`", f"*Slurm job:* {escape(job_id) if job_id else '_not yet_'}"]
    blocks: list[Block] = [
        _header(f"🐑 {run_name}"),
        {"type": "section", "fields": [{"type": "mrkdwn", "text": clip(f, 2000)} for f in fields]},
    ]
    if spec_summary:
        blocks.append(_section(escape(spec_summary)))
    if log_paths:
        blocks.append(_context("Logs: " + " · ".join(f"`{escape(p)}`" for p in log_paths[:6])))
    return clip(text, FALLBACK_MAX), blocks


LINK_BLOCK_ID = "shepherd-link"


def link(label: str, url: str) -> Block:
    """A link added to the thread's first message once it is known (the run's W&B page)."""
    return {
        "type": "context",
        "block_id": LINK_BLOCK_ID,
        "elements": [{"type": "mrkdwn", "text": clip(f"{escape(label)}: <{escape(url)}>", SECTION_MAX)}],
    }


def event(
    run_name: str,
    run_id: str,
    kind: str,
    title: str,
    text: str,
    level: str,
    excerpt: str | None = None,
    buttons: bool = False,
    excerpt_chars: int = 2500,
    actor: str | None = None,
) -> tuple[str, list[Block]]:
    """One event in a run's thread, with the evidence (log lines) and, for failures, what to do next."""
    head = f"{emoji_for(kind, level)} *{escape(title)}*"
    body = head + (f"\n{escape(text)}" if text else "")
    blocks: list[Block] = [_section(body)]
    if excerpt:
        blocks.append(_section("```" + escape(trim_excerpt(excerpt, excerpt_chars)) + "```"))
    if buttons:
        blocks.append(action_buttons(run_id))
    by = f" · by {mention(actor)}" if actor and mention(actor) else ""
    blocks.append(_context(f"`{escape(run_id)}` · {escape(kind)} · {escape(level)}{by}"))
    fallback = escape(f"{run_name}: {title}" + (f" — {text}" if text else ""))
    return clip(fallback, FALLBACK_MAX), blocks


def action_buttons(run_id: str) -> Block:
    def button(label: str, action_id: str, style: str | None = None) -> Block:
        b: Block = {
            "type": "button",
            "text": {"type": "plain_text", "text": label},
            "action_id": action_id,
            "value": run_id,
        }
        if style:
            b["style"] = style
        return b

    return {
        "type": "actions",
        "block_id": "shepherd_actions",
        "elements": [
            button("Resume from latest", ACTION_RESUME_LATEST, "primary"),
            button("Give up", ACTION_GIVE_UP, "danger"),
            button("Silence 4h", ACTION_SILENCE_4H),
        ],
    }


def broadcast_line(run_name: str, title: str) -> str:
    """The one-line channel summary for a failure that needs a human."""
    return clip(f":rotating_light: {escape(run_name)}: {escape(title)} — needs a human, see thread", 400)


def digest(
    run_name: str, run_id: str, dropped: int, titles: Sequence[str], window_s: float
) -> tuple[str, list[Block]]:
    """Stands in for the messages the flood bound held back, so nothing disappears silently."""
    shown = list(dict.fromkeys(titles))[:8]
    lines = "\n".join(f"• {escape(clip(t, 150))}" for t in shown)
    more = len(set(titles)) - len(shown)
    summary = f"{dropped} more event(s) in the last {window_s:.0f}s were not posted (flood bound)"
    body = f"{emoji_for('digest', 'info')} *{summary}*" + (f"\n{lines}" if lines else "")
    if more > 0:
        body += f"\n… and {more} other kind(s)"
    blocks = [_section(body), _context(f"`{escape(run_id)}` · digest · `shepherd status {escape(run_id)}`")]
    return clip(escape(f"{run_name}: {summary}"), FALLBACK_MAX), blocks


def acted(original_blocks: Sequence[Block], note: str) -> list[Block]:
    """The alert after a button was used: buttons gone, who did it appended (`note`: pre-escaped mrkdwn)."""
    kept = [b for b in original_blocks if b.get("type") != "actions"]
    return [*kept, _context(note)]


def with_related(blocks: Sequence[Block], lines: Sequence[str], count: int) -> list[Block]:
    """An incident's first message: its headline event plus the related events grouped into it."""
    if not lines:
        return list(blocks)
    body = f"*Grouped with {count} related event(s):*\n" + "\n".join(f"• {escape(x)}" for x in lines)
    out = list(blocks)
    at = len(out) - 1 if out and out[-1].get("type") == "context" else len(out)
    out.insert(at, _section(body))
    return out


def incident_update(
    run_name: str, run_id: str, headline: str, lines: Sequence[str], count: int, total: int
) -> tuple[str, list[Block]]:
    """What an open incident gathered since its last message (one per group interval at most)."""
    summary = f"{count} more related event(s) ({total} in this incident)"
    body = f":heavy_plus_sign: *{escape(summary)}*\n_{escape(clip(headline, 300))}_\n" + "\n".join(
        f"• {escape(x)}" for x in lines
    )
    blocks = [_section(body), _context(f"`{escape(run_id)}` · incident update")]
    return clip(escape(f"{run_name}: {summary}"), FALLBACK_MAX), blocks


def incident_repeat(
    run_name: str, run_id: str, headline: str, open_for: str, total: int
) -> tuple[str, list[Block]]:
    """A reminder that an incident needing a human is still firing."""
    summary = f"Still needs a human after {open_for}: {headline}"
    body = (
        f":bell: *{escape(clip(summary, 500))}*\n{total} event(s) so far · `shepherd status {escape(run_id)}`"
    )
    blocks = [_section(body), action_buttons(run_id), _context(f"`{escape(run_id)}` · incident repeat")]
    return clip(escape(f"{run_name}: {summary}"), FALLBACK_MAX), blocks


def incident_resolved(
    run_name: str, run_id: str, headline: str, why: str, open_for: str, total: int
) -> tuple[str, list[Block]]:
    """Closes an incident: what it was, what ended it, how long it lasted."""
    summary = f"Resolved: {headline}"
    body = f":white_check_mark: *{escape(clip(summary, 500))}*\n{escape(why)}"
    body += f" · open {open_for}, {total} event(s)"
    blocks = [_section(body), _context(f"`{escape(run_id)}` · incident resolved")]
    return clip(escape(f"{run_name}: {summary} ({why})"), FALLBACK_MAX), blocks
