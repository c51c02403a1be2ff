"""A batch API whose output is hostile: one bad line, file or page per case, over real HTTP against real
PostgreSQL (replay/openai_batches.py's stub; llm/batch_results.py collecting).

Each case records three questions of a month's queue, runs one round (submit, poll, collect) with the
provider misbehaving, then one round with it behaving. The rules: the batch is collected (one bad line or
file is never the queue's), every good answer is stored, the bad one's request waits again with the reason,
no row anywhere is lost or duplicated, and the second round answers every question, each asked at most
twice.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.batch_queue import ask_all, echo_stub

from deepscholar.llm import batch_results, batch_transport
from deepscholar.llm.batch_transport import BatchQueue
from deepscholar.llm.batches import OpenAIBatches
from deepscholar.replay.openai_batches import BAD_LINES
from faults.conftest import unchanged

MODEL = "openai/gpt-4o-mini"
QUEUE = BatchQueue("2025-05", f"llm:{MODEL}", "fault-run")
PROMPTS = ["first", "hostile", "third"]
BATCH_TABLES = ["llm_calls", "llm_batch_requests", "llm_batches"]  # what a round may write
# (case, what the stub does to the "hostile" question's answer or file, the reason stored for it)
OUTPUT_CASES = [(kind, kind, "malformed answer line") for kind in BAD_LINES] + [
    ("unescaped_line_separator", "separator", None),
    ("slow_download_every_try", "slow", "could not be downloaded"),
]


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with echo_stub() as server:
        yield server


def _ask(engine, stub, prompts) -> list[str | None]:
    return ask_all(engine, MODEL, stub.url, prompts, QUEUE)


def _round(engine, api) -> dict:
    batch_transport.submit_pending(engine, QUEUE, api=api)
    batch_transport.poll_batches(engine, QUEUE, api=api)
    total: dict = {}
    for _ in range(batch_results.COLLECT_TRIES):  # a deferred batch is tried again at the next steps
        for k, v in batch_results.collect_results(engine, QUEUE, api=api).items():
            total[k] = total.get(k, 0) + v
        if not batch_transport.batch_status(engine, QUEUE)["ended"]:
            break
    return total


@pytest.mark.parametrize(("case", "fault", "reason"), OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
def test_one_hostile_answer_or_file_is_that_requests_error_never_the_queues(engine, stub, case, fault, reason):
    prompts = [p if p != "hostile" or fault != "separator" else "hostile\u2028line" for p in PROMPTS]
    _ask(engine, stub, prompts)
    api = (lambda base: OpenAIBatches(stub.url, "test", timeout=0.2, max_file_bytes=20_000)) if fault == "slow" \
        else (lambda base: OpenAIBatches(stub.url, "test"))
    if fault == "slow":
        stub.slow_downloads = batch_results.COLLECT_TRIES
    elif fault != "separator":
        stub.bad_line_if = lambda body: fault if body["messages"][-1]["content"] == "hostile" else None
    with unchanged(engine, allowed_to_change=BATCH_TABLES):
        first = _round(engine, api)
    assert first["batches"] == 1
    with engine.connect() as conn:
        waiting = conn.execute(sa.text("SELECT request->'messages'->0->>'content', last_error FROM llm_batch_requests "
                                       "WHERE state = 'pending'")).all()
        assert conn.execute(sa.text("SELECT count(*) FROM llm_batches WHERE state <> 'collected'")).scalar() == 0
    if reason is None:  # a line the old splitter broke: answered like the others
        assert first["answered"] == 3 and waiting == []
    elif fault == "slow":  # the whole file, every try: the batch's requests wait again, none lost
        assert first["answered"] == 0 and len(waiting) == 3 and all(reason in e for _, e in waiting)
    else:
        assert first["answered"] == 2 and [w[0] for w in waiting] == ["hostile"] and reason in waiting[0][1]
    stub.bad_line_if, stub.slow_downloads = None, 0
    with unchanged(engine, allowed_to_change=BATCH_TABLES):
        _round(engine, api)
    assert _ask(engine, stub, prompts) == [f"answer to {p}" for p in prompts]
    assert all(stub.lines_answered.count(h) <= 2 for h in stub.lines_answered)
