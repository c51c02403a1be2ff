"""A model server that is busy, told apart from one that is down, and per-model serving settings.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.busy_server`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from deepscholar.errors import ProviderTooSlow
from deepscholar.settings import current_settings

__all__ = ["SLOW_RESENDS", "SLOW_PAUSE_MAX_SECONDS", "InFlight", "ServerBusy", "after_timeout", "is_timeout",
           "serving_of"]

log = logging.getLogger(__name__)

# A request that timed out on a server that is up is sent this many times more, after a pause, before the
# work stops: each resend is one more long prompt on a server that may still be generating the abandoned one.
SLOW_RESENDS = 1
SLOW_PAUSE_MAX_SECONDS = 60.0


def serving_of(model: str) -> tuple[float | None, int | None]:
    """(timeout seconds, most requests in flight) DEEPSCHOLAR_LLM_SERVING gives this model, None where unset."""
    for name, timeout, concurrency in current_settings().llm_serving:
        if name == model:
            return timeout, concurrency
    return None, None


class InFlight:
    """The requests one client may have in flight at once (a context manager per request): `slots` of them,
    one fewer each time its server is found busy (`retire`), never fewer than one."""

    def __init__(self, slots: int) -> None:
        self._gate = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.slots = slots

    def __enter__(self) -> InFlight:
        self._gate.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self._gate.release()

    def retire(self) -> int:
        """One slot fewer from now on (kept by this object, never released): waits for a request in flight
        to end when all are taken. Returns the slots left."""
        with self._lock:
            if self.slots <= 1:
                return self.slots
            self.slots -= 1
            left = self.slots
        self._gate.acquire()
        return left


class ServerBusy(Exception):  # noqa: N818 (a state: retried after its pause, never raised to callers)
    """A timeout of a server that is up, retried once the pause is over; `too_slow` when no retry is left."""

    def __init__(self, too_slow: ProviderTooSlow) -> None:
        super().__init__(str(too_slow))
        self.too_slow = too_slow


def is_timeout(exc: BaseException) -> bool:
    """A request that got no answer in time (the OpenAI SDK's APITimeoutError: litellm's Timeout and the
    direct path's timeouts are one)."""
    import openai

    return isinstance(exc, openai.APITimeoutError)


def after_timeout(client: Any, exc: BaseException, timeouts: int, purpose: str) -> BaseException:
    """What the `timeouts`-th timeout of one request becomes: the timeout itself when the server does not
    answer a probe (down, or no api_base to probe: retried and counted by the breaker as any outage), else
    ServerBusy after a pause (retried) or, past SLOW_RESENDS, ProviderTooSlow. Holds no connection or slot.
    `client`: the LLMClient asking (typed loosely: the client imports this module)."""
    from deepscholar.llm import openai_compatible

    probed = openai_compatible.probe(client.api_base, client._api_key) if client.api_base else None
    if probed is None:
        return exc
    slots = client._in_flight.retire()
    if probed.answered:
        seen = f"the server answered a probe of its models endpoint in {probed.seconds:.2f} s: it is busy, not down"
    else:
        seen = (f"the server took a probe's connection but did not answer its models endpoint within "
                f"{probed.seconds:.1f} s, as a server that lists its models only between generations does: it "
                f"is busy generating (or hung), not down")
    too_slow = ProviderTooSlow(client.service, (
        f"a request ({purpose}) timed out {timeouts} time{'s' if timeouts > 1 else ''} after {client.timeout:g} s "
        f"while {seen}. "
        f"Give each request more time (\"timeout_seconds\" for {client.model} in DEEPSCHOLAR_LLM_SERVING, or "
        f"--timeout; now {client.timeout:g} s) or send fewer at once (\"concurrency\" there, or --concurrency; "
        f"now {slots} in flight)"))
    if timeouts > min(SLOW_RESENDS, client.max_retries):
        log.error("%s", too_slow)
        return too_slow
    pause = min(client.timeout / 2, SLOW_PAUSE_MAX_SECONDS)
    log.warning("%s timed out after %g s (%s) but %s a probe (%.2f s): busy, not down; %d request(s) in flight "
                "from now on, this one sent again in %.0f s", client.service, client.timeout, purpose,
                "answered" if probed.answered else "took the connection of", probed.seconds, slots, pause)
    time.sleep(pause)
    return ServerBusy(too_slow)
