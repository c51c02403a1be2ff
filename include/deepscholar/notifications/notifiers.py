"""Sending a Message through Airflow's notifiers, to the connections DEEPSCHOLAR_NOTIFY routes its event to.

The connection's type picks the notifier: `smtp` (or `email`) the SMTP provider's SmtpNotifier, to the
addresses in its extra `to` (comma-separated; the approval request adds approvers whose ids are addresses);
`slackwebhook` the Slack provider's SlackWebhookNotifier; `http` / `https` WebhookNotifier below, posting the
message as JSON. Each is used with its templated fields cut to the connection id: our text carries third
parties' words, already escaped for the medium, and must never be rendered as a Jinja template (a system
named `{{ var.value.secret }}` would otherwise put an Airflow Variable in the message).

Why a webhook notifier of our own: the HTTP provider's HttpNotifier would do the POST, but it is one more
provider (and aiohttp) in the image for one request, and its body is a templated field too. httpx, which
the project already uses, posts the JSON in a few lines.

`send` never raises: a notifier that fails is logged (with the connection and event) and the task it
reports on goes on as if nothing happened.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.providers.common.compat.notifier import BaseNotifier
from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier
from airflow.providers.smtp.notifications.smtp import SmtpNotifier

from deepscholar.notifications.messages import Message, to_html, to_json, to_slack
from deepscholar.settings import current_settings

__all__ = ["PlainSlackWebhookNotifier", "PlainSmtpNotifier", "WebhookNotifier", "notifier_for", "routes_for", "send"]

log = logging.getLogger(__name__)
WEBHOOK_TIMEOUT_SECONDS = 10.0


class PlainSmtpNotifier(SmtpNotifier):
    """SmtpNotifier whose subject and body are sent as given, never rendered as Jinja templates."""

    template_fields = ("smtp_conn_id",)  # type: ignore[assignment]  # fewer fields than the base on purpose


class PlainSlackWebhookNotifier(SlackWebhookNotifier):
    """SlackWebhookNotifier whose text is sent as given, never rendered as a Jinja template."""

    template_fields = ("slack_webhook_conn_id",)  # type: ignore[assignment]  # likewise


class WebhookNotifier(BaseNotifier):
    """POST `payload` as JSON to the URL of an HTTP connection: its extra `url`, else
    `<conn_type>://host[:port][/schema]` (the URI form `http://host:port/path`); its password, when set, is
    sent as a bearer token. A non-2xx answer raises (and `send` logs it)."""

    template_fields = ("http_conn_id",)

    def __init__(self, *, http_conn_id: str, payload: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.http_conn_id = http_conn_id
        self.payload = payload

    def notify(self, context: Any) -> None:
        import httpx
        from airflow.sdk import Connection

        conn = Connection.get(self.http_conn_id)
        url = webhook_url(conn)
        headers = {"Authorization": f"Bearer {conn.password}"} if conn.password else {}
        response = httpx.post(url, json=self.payload, headers=headers, timeout=WEBHOOK_TIMEOUT_SECONDS)
        response.raise_for_status()


def webhook_url(conn: Any) -> str:
    """The URL an HTTP connection names (see WebhookNotifier)."""
    extra = conn.extra_dejson or {}
    if extra.get("url"):
        return str(extra["url"])
    host = conn.host or ""
    if host.startswith(("http://", "https://")):
        base = host
    else:
        scheme = conn.conn_type if conn.conn_type in ("http", "https") else "http"
        base = f"{scheme}://{host}" + (f":{conn.port}" if conn.port else "")
    return base.rstrip("/") + (f"/{conn.schema.lstrip('/')}" if conn.schema else "")


def routes_for(event: str) -> list[str]:
    """The connection ids DEEPSCHOLAR_NOTIFY sends `event` to."""
    return [conn_id for name, conn_id in current_settings().notify if name == event]


def _recipients(extra: dict, also: Sequence[str]) -> list[str]:
    listed = [a.strip() for a in str(extra.get("to") or "").split(",") if a.strip()]
    return list(dict.fromkeys([*listed, *(a for a in also if "@" in a)]))


def notifier_for(conn_id: str, message: Message, also_to: Sequence[str] = ()) -> BaseNotifier:
    """The notifier of connection `conn_id`'s type, carrying `message` rendered for its medium."""
    from airflow.sdk import Connection

    conn = Connection.get(conn_id)
    kind = (conn.conn_type or "").lower()
    if kind in ("smtp", "email"):
        to = _recipients(conn.extra_dejson or {}, also_to)
        if not to:
            raise ValueError(f"connection {conn_id} names no recipient: set its extra \"to\"")
        return PlainSmtpNotifier(to=to, subject=message.subject, html_content=to_html(message), smtp_conn_id=conn_id)
    if kind in ("slackwebhook", "slack_webhook"):
        return PlainSlackWebhookNotifier(slack_webhook_conn_id=conn_id, text=to_slack(message))
    if kind in ("http", "https"):
        return WebhookNotifier(http_conn_id=conn_id, payload=to_json(message))
    raise ValueError(f"connection {conn_id} is of type {kind!r}: notifications go to smtp, slackwebhook or http")


def send(message: Message, context: Any = None, also_to: Sequence[str] = ()) -> dict[str, str]:
    """Send `message` to every connection its event is routed to: {conn_id: "sent" or "failed: why"}.
    Never raises: a failure is logged and the caller's task goes on."""
    outcome: dict[str, str] = {}
    for conn_id in routes_for(message.event):
        try:
            notifier_for(conn_id, message, also_to)(context if context is not None else {})
            outcome[conn_id] = "sent"
        except Exception as exc:  # a notification must never fail the task it reports on
            why = " ".join(str(exc).split())[:300] or type(exc).__name__
            log.warning("notification %s to %s failed: %s", message.event, conn_id, why)
            outcome[conn_id] = f"failed: {why}"
    if outcome:
        log.info("notification %s: %s", message.event, outcome)
    return outcome
