"""Notification messages (deepscholar.notifications.messages): third parties' text escaped for each medium
(HTML email, Slack mrkdwn, JSON), made one line and bounded, links only http(s)."""

from __future__ import annotations

import html
import json

from deepscholar.notifications import messages
from deepscholar.settings import Settings

HOSTILE = '<script>alert(1)</script> & "x" {{ var.value.secret }} <!channel> <http://evil|click>\r\nSubject: forged'


def test_html_escapes_every_third_party_part():
    m = messages.board_published("2025-06", 3, "llm:m", [HOSTILE, "plain"], 1.5, "https://site.example/2025-06")
    body = messages.to_html(m)
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert html.escape('"x"', quote=True) in body
    assert "\r" not in body and "\nSubject: forged" not in body  # one line per value
    assert '<a href="https://site.example/2025-06">site</a>' in body


def test_slack_text_cannot_mention_or_forge_a_link():
    m = messages.run_failed("2025-06", "deepscholar_benchmark", "judge", HOSTILE, "https://airflow.example/log?x=1")
    text = messages.to_slack(m)
    assert "<!channel>" not in text and "<http://evil" not in text
    assert "&lt;!channel&gt;" in text
    assert text.count("<") == 1 and "<https://airflow.example/log?x=1|log>" in text  # only our own link


def test_json_round_trips_the_text_as_given_on_one_line():
    m = messages.release_failed("2025-06", [HOSTILE], "deepscholar release build 2025-06")
    payload = json.loads(json.dumps(messages.to_json(m)))
    assert payload["event"] == "release_failed" and payload["month"] == "2025-06"
    assert payload["failing_checks"] == [HOSTILE]  # the structured field keeps the checks' names
    assert payload["lines"] == [messages.one_line(HOSTILE)] and "\n" not in payload["lines"][0]


def test_sizes_are_bounded():
    huge = "x" * 100_000
    m = messages.approval_asked("2025-06", ["admin"], [huge] * 500, 12.0, 10.0, "https://airflow.example/ra")
    assert len(m.lines) == messages.MAX_LINES + 1 and m.lines[-1] == f"... and {500 - messages.MAX_LINES} more"
    assert all(len(line) <= messages.MAX_VALUE_CHARS for line in m.lines)
    assert len(messages.to_slack(m)) <= messages.MAX_SLACK_CHARS
    assert len(messages.to_html(m)) < 20_000 and len(json.dumps(messages.to_json(m))) < 20_000


def test_only_http_links_are_kept():
    m = messages.board_published("2025-06", 1, "j", [], None, "javascript:alert(1)")
    assert m.links == () and "javascript" not in messages.to_html(m)
    assert messages.safe_url("https://ok.example/a b") is None
    assert messages.board_published("2025-06", 1, "j", [], None, None).facts[-1] == ("month's cost", "unknown")


def test_the_routing_setting():
    routes = Settings.from_env({"DEEPSCHOLAR_NOTIFY": "release_failed,run_failed:smtp_a;board_published:hook, smtp_a"})
    assert routes.notify == (("board_published", "hook"), ("board_published", "smtp_a"), ("release_failed", "smtp_a"),
                             ("run_failed", "smtp_a"))
    every = Settings.from_env({"DEEPSCHOLAR_NOTIFY": "*:ops"}).notify
    assert {event for event, _ in every} == {"release_failed", "run_failed", "board_published", "approval_asked",
                                              "deadline_missed"}
    for bad in ("nonsense:smtp", "run_failed", "run_failed:", "run_failed:a b"):
        try:
            Settings.from_env({"DEEPSCHOLAR_NOTIFY": bad})
        except ValueError as exc:
            assert "DEEPSCHOLAR_NOTIFY" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")
