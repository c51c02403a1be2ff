"""Real receivers for the project's notifications: an SMTP server (aiosmtpd) keeping every mail, and the
Airflow connection definitions (AIRFLOW_CONN_* values) that point the SMTP notifier and the JSON webhook at
them. Used by the notification tests and by the end-to-end runs under the real scheduler."""

from __future__ import annotations

import contextlib
import email
import email.policy
import json
import threading
from collections.abc import Iterator

from aiosmtpd.controller import Controller

from deepscholar.local_airflow import free_port


class Inbox:
    """aiosmtpd handler keeping every message it receives."""

    def __init__(self) -> None:
        self.received: list[email.message.EmailMessage] = []
        self.arrived = threading.Event()
        self.port = 0

    async def handle_DATA(self, server, session, envelope):  # noqa: N802  (aiosmtpd's hook name)
        self.received.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        self.arrived.set()
        return "250 OK"

    def connection(self) -> str:
        """The AIRFLOW_CONN_* value of an SMTP connection to this server (plain, no TLS)."""
        return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": self.port,
                           "extra": {"from_email": "deepscholar@example.org", "to": "ops@example.org",
                                     "disable_ssl": True, "disable_tls": True, "timeout": 10, "retry_limit": 1}})


@contextlib.contextmanager
def smtp_inbox() -> Iterator[Inbox]:
    """A real SMTP server on a free loopback port while the block runs."""
    box = Inbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    box.port = controller.port
    try:
        yield box
    finally:
        controller.stop()


def webhook_connection(url: str) -> str:
    """The AIRFLOW_CONN_* value of the JSON webhook notifier's connection (an `http` connection's url)."""
    return json.dumps({"conn_type": "http", "extra": {"url": url}})


def posted(server, path: str) -> list[dict]:
    """The JSON bodies a pytest_httpserver received on `path`, in order."""
    return [json.loads(req.get_data()) for req, _ in server.log if req.path == path]
