"""What each notification says, built and rendered as pure functions (no Airflow, no network).

Design notes: docs/MODULE_NOTES.md, `deepscholar.notifications.messages`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deepscholar.llm.prices import usd_text

MAX_VALUE_CHARS = 300  # one fact, one line, a subject
MAX_LINES = 20  # lines listed (failing checks, systems, estimate rows); the rest counted
MAX_SLACK_CHARS = 3000  # Slack's limit for one section's text
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """`value` as text on one line (control characters become spaces) of at most `limit` characters."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def safe_url(url: str | None) -> str | None:
    """An http(s) URL without spaces or control characters, else None (never a javascript: link)."""
    if not url:
        return None
    text = str(url).strip()
    return text if re.fullmatch(r"https?://[^\s<>|\"'`\x00-\x1f]+", text) and len(text) <= 2000 else None


@dataclass(frozen=True)
class Message:
    """One notification in plain text, before a medium's escaping."""

    event: str
    subject: str
    facts: tuple[tuple[str, str], ...] = ()
    lines: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    command: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # structured fields for the webhook's JSON


def _message(event: str, subject: str, facts: Sequence[tuple[str, Any]], lines: Sequence[Any] = (),
             links: Sequence[tuple[str, str | None]] = (), command: str | None = None, **extra: Any) -> Message:
    """A Message with every part made one line and bounded, lists cut to MAX_LINES, unsafe links dropped."""
    shown = [one_line(x) for x in lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        shown.append(f"... and {len(lines) - MAX_LINES} more")
    return Message(event=event, subject=one_line(subject, 150),
                   facts=tuple((label, one_line(value)) for label, value in facts if value not in (None, "")),
                   lines=tuple(shown),
                   links=tuple((label, url) for label, raw in links if (url := safe_url(raw))),
                   command=one_line(command) if command else None, extra=extra)


# --- the events -------------------------------------------------------------------------------------------

def release_failed(month: str, failing_checks: Sequence[str], rebuild_command: str,
                   log_url: str | None = None) -> Message:
    return _message("release_failed", f"DeepScholar: release {month} failed its quality gate",
                    [("month", month), ("failing checks", len(failing_checks))], failing_checks,
                    [("log", log_url)], rebuild_command, month=month, failing_checks=list(failing_checks)[:MAX_LINES])


def run_failed(month: str | None, dag_id: str, task_id: str, error_line: str, log_url: str | None = None,
               run_id: str | None = None) -> Message:
    return _message("run_failed", f"DeepScholar: {task_id} failed in {dag_id} ({month or 'no month'})",
                    [("month", month), ("DAG", dag_id), ("run", run_id), ("task", task_id),
                     ("error", error_line)], links=[("log", log_url)],
                    command=f"airflow tasks clear {dag_id} -t '^{task_id}$' -s {month}-01 -e {month}-01"
                    if month else None, month=month, task=task_id, error=one_line(error_line))


def board_published(month: str, board_version: int, judge_config: str, systems: Sequence[str],
                    cost_usd: float | None, site_url: str | None = None) -> Message:
    cost = usd_text(cost_usd)
    return _message("board_published", f"DeepScholar: board of {month} published (version {board_version})",
                    [("month", month), ("board version", board_version), ("judge", judge_config),
                     ("systems", len(systems)), ("month's cost", cost)], systems, [("site", site_url)],
                    f"deepscholar leaderboard --release {month}", month=month, board_version=board_version,
                    systems=[one_line(s) for s in systems[:MAX_LINES]], cost_usd=cost_usd)


def approval_asked(month: str, approvers: Sequence[str], estimate_lines: Sequence[str], total_usd: float | None,
                   budget_usd: float | None, required_actions_url: str | None) -> Message:
    """`estimate_lines`: the kept estimate's table, by system, metric and model (evaluation/money/budget.py)."""
    return _message("approval_asked", f"DeepScholar: approve the judging budget of {month}",
                    [("month", month), ("approvers", ", ".join(approvers)), ("estimate", usd_text(total_usd, unknown="unpriced")),
                     ("budget", usd_text(budget_usd, unknown="unpriced"))], [ln for ln in estimate_lines if ln.strip()],
                    [("Required actions", required_actions_url)], month=month, approvers=list(approvers),
                    total_usd=total_usd, budget_usd=budget_usd)


def deadline_missed(month: str, hours: float, deadline: str, waiting_on: str, run_id: str,
                    run_url: str | None = None) -> Message:
    return _message("deadline_missed", f"DeepScholar: board of {month} not published {hours:g} h after the month",
                    [("month", month), ("deadline", deadline), ("run", run_id), ("waiting on", waiting_on)],
                    links=[("run", run_url)], month=month, waiting_on=one_line(waiting_on))


# --- the media --------------------------------------------------------------------------------------------

def to_html(message: Message) -> str:
    """An HTML email body: every part escaped, links only http(s)."""
    esc = lambda text: html.escape(text, quote=True)  # noqa: E731
    rows = "".join(f"<tr><th align=\"left\">{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in message.facts)
    parts = [f"<h3>{esc(message.subject)}</h3>", f"<table>{rows}</table>"]
    if message.lines:
        parts.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in message.lines) + "</ul>")
    if message.command:
        parts.append(f"<p>Command: <code>{esc(message.command)}</code></p>")
    parts += [f"<p><a href=\"{esc(url)}\">{esc(label)}</a></p>" for label, url in message.links]
    return "\n".join(parts)


def slack_escape(text: str) -> str:
    """Slack's mrkdwn escaping: &, < and > as entities (so no <!channel>, <@user> or forged link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_slack(message: Message) -> str:
    """Slack mrkdwn text, escaped, at most MAX_SLACK_CHARS characters."""
    out = [f"*{slack_escape(message.subject)}*"]
    out += [f"{slack_escape(k)}: {slack_escape(v)}" for k, v in message.facts]
    out += [f"• {slack_escape(line)}" for line in message.lines]
    if message.command:
        out.append(f"Command: `{slack_escape(message.command.replace('`', chr(39)))}`")
    out += [f"<{url}|{slack_escape(label)}>" for label, url in message.links]
    text = "\n".join(out)
    return text if len(text) <= MAX_SLACK_CHARS else text[:MAX_SLACK_CHARS - 1] + "…"


def to_json(message: Message) -> dict[str, Any]:
    """The webhook's JSON body (json.dumps escapes it)."""
    return {"event": message.event, "subject": message.subject, "facts": dict(message.facts),
            "lines": list(message.lines), "links": dict(message.links), "command": message.command,
            **message.extra}
