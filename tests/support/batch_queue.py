"""Asking questions through a month's batch queue, for tests of the batch transport (llm/batch_transport.py)
against the batch stub (replay/openai_batches.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from deepscholar.llm.batch_transport import BatchQueue
from deepscholar.llm.client import AwaitingBatch, LLMClient
from deepscholar.replay.openai_batches import BatchStub

__all__ = ["ask_all", "echo_stub"]


@contextmanager
def echo_stub() -> Iterator[BatchStub]:
    """The batch stub answering each question with "answer to <question>"; a failure inside the stub is
    raised when it stops (a test's `with`), not lost in its thread."""
    with BatchStub(answer=lambda body: "answer to " + body["messages"][-1]["content"]) as server:
        yield server
    server.raise_errors()


def ask_all(engine, model: str, api_base: str, prompts: list[str], queue: BatchQueue | None) -> list[str | None]:
    """Each prompt through a fresh client (in batch mode when given a queue): its answer, or None when it
    waits for a batch (then recorded in the queue)."""
    client = LLMClient(engine, model, api_base=api_base, api_key="test", batch=queue)
    out: list[str | None] = []
    for prompt in prompts:
        try:
            out.append(client.complete([{"role": "user", "content": prompt}], purpose="test").text)
        except AwaitingBatch:
            out.append(None)
    return out
