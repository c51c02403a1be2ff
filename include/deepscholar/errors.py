"""Who is at fault: the exception types that decide what a failure becomes.

Design notes: docs/MODULE_NOTES.md, `deepscholar.errors`.
"""

from __future__ import annotations

__all__ = ["DeepScholarError", "UserError", "NotFound", "InvalidInput", "MissingCredentials", "OverBudget",
           "InfrastructureError", "ProviderTooSlow", "SystemFailure", "JudgeError", "infrastructure_cause", "is_warehouse_outage"]


class DeepScholarError(Exception):
    """Base of the project's own exception types."""


class UserError(DeepScholarError):
    """The caller is at fault and can fix it; the message says how (CLI: one line, exit 2)."""


class NotFound(UserError, LookupError):
    """A release, system, metric or file the user named does not exist (still a LookupError for callers)."""


class InvalidInput(UserError, ValueError):
    """A value the user gave is malformed or not allowed (still a ValueError for callers)."""


class MissingCredentials(UserError):
    """A provider's API key is not configured; `variable` names the environment variable to set."""

    def __init__(self, variable: str, model: str) -> None:
        self.variable = variable
        self.model = model
        super().__init__(f"{variable} is not set: the LLM provider of {model} needs it (export {variable}=...)")


class OverBudget(UserError):
    """Judging would cost, or has cost, more than its budget allows: nothing more is sent. The message gives
    the amounts and how to go on (a raised budget, or the operator's approval); what was answered is kept."""


class InfrastructureError(DeepScholarError):
    """A dependency failed after its retries: `service` names it (e.g. "LLM provider openai/gpt-4o at
    https://api.openai.com/v1", "arXiv search at http://export.arxiv.org/api/query"); the original
    exception is `__cause__`."""

    def __init__(self, service: str, cause: BaseException | str) -> None:
        self.service = service
        detail = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"{service} unavailable: {detail}")


class ProviderTooSlow(InfrastructureError):
    """A provider that is up (it answers a cheap probe) but does not answer requests within the timeout:
    busy, not down. Sending more would pile prompts onto a server still working on the abandoned ones, so
    the work stops with the settings to change (`detail` names them)."""

    def __init__(self, service: str, detail: str) -> None:
        self.service = service
        DeepScholarError.__init__(self, f"{service} answers, but too slowly: {detail}")


class SystemFailure(DeepScholarError):
    """A system failed to produce a report; stored as status system_error with this message."""


class JudgeError(DeepScholarError):
    """A judge's answer that cannot be used; the item ends unscored with this message as its reason."""


def is_warehouse_outage(exc: BaseException) -> bool:
    """The warehouse itself failed (connection refused or lost), as opposed to a bad query."""
    import sqlalchemy.exc

    return isinstance(exc, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)) or bool(
        isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated)


def infrastructure_cause(exc: BaseException, *, max_depth: int = 10) -> BaseException | None:
    """The infrastructure failure behind `exc`, if any: itself or an exception it was raised from or
    while handling (a system wrapping a provider outage in its own error does not make it the system's
    fault)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < max_depth:
        seen.add(id(current))
        if isinstance(current, InfrastructureError) or is_warehouse_outage(current):
            return current
        current = current.__cause__ or current.__context__
    return None
