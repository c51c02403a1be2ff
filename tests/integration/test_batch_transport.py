"""The batch transport (llm/batch_transport.py) on real PostgreSQL against the batch API stub over real HTTP
(replay/openai_batches.py), with the real LLMClient in batch mode recording what the cache cannot answer:
a lost create answer does not make a second batch, a partly failed batch re-asks only its failures, an
expired batch is submitted again a bounded number of times, and every answer's audit row carries the batch
price."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from deepscholar.llm import batch_transport
from deepscholar.llm.batches import OpenAIBatches
from deepscholar.llm.client import AwaitingBatch, LLMClient, ParseError
from deepscholar.llm.prices import cost_usd
from deepscholar.replay.openai_batches import BatchStub

MODEL = "openai/gpt-4o-mini"  # a model litellm's table prices, with batch prices


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with BatchStub(answer=lambda body: "answer to " + body["messages"][-1]["content"]) as server:
        yield server
    server.raise_errors()


def _api(stub):
    return lambda api_base: OpenAIBatches(stub.url, "test")


def _ask_all(engine, stub, prompts, *, batch=True) -> list[str | None]:
    """Each prompt through a fresh client: its answer, or None when it waits for a batch."""
    client = LLMClient(engine, MODEL, api_base=stub.url, api_key="test", batch=batch)
    out = []
    for p in prompts:
        try:
            out.append(client.complete([{"role": "user", "content": p}], purpose="test").text)
        except AwaitingBatch:
            out.append(None)
    return out


def _run_batches(engine, stub) -> dict:
    submitted = batch_transport.submit_pending(engine, api=_api(stub))
    status = batch_transport.poll_batches(engine, api=_api(stub))
    assert status["open"] == 0  # the stub answers at once (delay 0)
    return {"submitted": submitted, **batch_transport.collect_results(engine, api=_api(stub))}


def _requests(engine) -> dict[str, tuple[str, int]]:
    with engine.connect() as conn:
        return {h: (s, a) for h, s, a in conn.execute(sa.text(
            "SELECT request_hash, state, attempts FROM llm_batch_requests"))}


def test_a_round_records_submits_collects_and_the_next_pass_reads_the_cache(engine, stub):
    prompts = [f"q{i}" for i in range(5)]
    assert _ask_all(engine, stub, prompts) == [None] * 5
    assert _ask_all(engine, stub, prompts) == [None] * 5  # recording again is idempotent
    assert set(v for v in _requests(engine).values()) == {("pending", 0)}
    outcome = _run_batches(engine, stub)
    assert len(outcome["submitted"]) == 1 and outcome["answered"] == 5 and stub.creates == 1
    assert _ask_all(engine, stub, prompts) == [f"answer to {p}" for p in prompts]
    assert _ask_all(engine, stub, prompts, batch=False) == [f"answer to {p}" for p in prompts]  # same cache rows
    # Nothing left: another submit sends nothing.
    assert batch_transport.submit_pending(engine, api=_api(stub)) == [] and stub.creates == 1
    # The JSONL line carries exactly the body the direct path posts.
    line = next(iter(stub.files.values()))["content"].decode().splitlines()[0]
    import json

    body = json.loads(line)
    assert (body["method"], body["url"]) == ("POST", "/v1/chat/completions")
    assert body["body"] == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": body["body"][
        "messages"][0]["content"]}], "temperature": 0, "seed": 0}


def test_the_audit_rows_carry_the_batch_price_half_the_direct_one(engine, stub):
    _ask_all(engine, stub, ["a", "b"])
    _run_batches(engine, stub)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT transport, cost_usd, prompt_tokens, completion_tokens, provider_model, "
                                    "latency_ms FROM llm_calls")).all()
    direct = cost_usd(None, MODEL, 12, 5)
    assert len(rows) == 2 and direct
    for transport, cost, prompt, completion, served, latency in rows:
        assert (transport, prompt, completion, served, latency) == ("openai-batch", 12, 5, "gpt-4o-mini", None)
        assert cost == pytest.approx(direct / 2)


def test_a_retried_submit_whose_create_answer_was_lost_creates_no_second_batch(engine, stub):
    from deepscholar.errors import InfrastructureError

    _ask_all(engine, stub, ["x", "y", "z"])
    stub.lose_creates = 1
    with pytest.raises(InfrastructureError, match="502"):
        batch_transport.submit_pending(engine, api=_api(stub))
    assert stub.creates == 1 and len(stub.batches) == 1  # the provider made it; we never heard
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT state, provider_batch_id FROM llm_batches")).one() == ("creating", None)
    uploads = len(stub.files)
    # The task's retry: finds the batch by its metadata instead of creating another.
    assert len(batch_transport.submit_pending(engine, api=_api(stub))) == 1
    assert stub.creates == 1 and len(stub.batches) == 1 and len(stub.files) == uploads
    with engine.connect() as conn:
        key, batch_id = conn.execute(sa.text("SELECT batch_key, provider_batch_id FROM llm_batches")).one()
    assert stub.batches[batch_id]["metadata"] == {batch_transport.METADATA_KEY: key}
    assert batch_transport.poll_batches(engine, api=_api(stub))["ended"] == 1
    assert batch_transport.collect_results(engine, api=_api(stub))["answered"] == 3
    assert _ask_all(engine, stub, ["x", "y", "z"]) == ["answer to x", "answer to y", "answer to z"]


def test_a_partly_failed_batch_re_asks_only_the_failed_requests(engine, stub):
    prompts = [f"p{i}" for i in range(6)]
    _ask_all(engine, stub, prompts)
    stub.fail_if = lambda body: body["messages"][-1]["content"] in ("p1", "p4")
    first = _run_batches(engine, stub)
    assert (first["answered"], first["retried"], first["failed"]) == (4, 2, 0)
    asked_first = list(stub.lines_answered)
    assert len(asked_first) == 6
    answers = _ask_all(engine, stub, prompts)
    assert [a is None for a in answers] == [False, True, False, False, True, False]
    stub.fail_if = None
    second = _run_batches(engine, stub)
    assert (second["answered"], second["retried"]) == (2, 0)
    resent = stub.lines_answered[len(asked_first):]
    hashes = {h for h, (s, a) in _requests(engine).items() if a == 2}
    assert sorted(resent) == sorted(hashes) and len(resent) == 2  # only the two failures went again
    assert _ask_all(engine, stub, prompts) == [f"answer to {p}" for p in prompts]


def test_an_expired_batch_is_submitted_again_boundedly_then_the_item_is_unscored(engine, stub, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_BATCH_MAX_ATTEMPTS", "2")
    _ask_all(engine, stub, ["late"])
    stub.expire_batches = 1
    first = _run_batches(engine, stub)
    assert (first["answered"], first["retried"], first["failed"]) == (0, 1, 0)
    assert list(_requests(engine).values()) == [("pending", 1)]
    stub.expire_batches = 1
    second = _run_batches(engine, stub)  # the second submission expires too: no third
    assert (second["answered"], second["retried"], second["failed"]) == (0, 0, 1)
    assert list(_requests(engine).values()) == [("failed", 2)]
    assert batch_transport.submit_pending(engine, api=_api(stub)) == [] and stub.creates == 2
    with engine.connect() as conn:
        assert [r for (r,) in conn.execute(sa.text("SELECT provider_status FROM llm_batches"))] == ["expired"] * 2
    # The judge's item then ends unscored with the provider's reason, as a rejected request does directly.
    client = LLMClient(engine, MODEL, api_base=stub.url, api_key="test", batch=True)

    def parse(text):
        raise ParseError("never reached")

    judged = client.ask([{"role": "user", "content": "late"}], parse, purpose="test", max_tokens=None)
    assert not judged.scored and "batch_expired" in judged.unscored_reason and "2 submissions" in judged.unscored_reason


def test_batches_are_cut_within_the_request_and_byte_limits():
    lines = [(f"h{i}", b"x" * 10) for i in range(7)]
    batches, too_large = batch_transport.plan_batches(lines, max_requests=3, max_bytes=1000)
    assert [len(b) for b in batches] == [3, 3, 1] and too_large == []
    batches, too_large = batch_transport.plan_batches([*lines, ("big", b"y" * 50)], max_requests=100, max_bytes=25)
    assert [len(b) for b in batches] == [2, 2, 2, 1] and too_large == ["big"]


def test_a_waiting_step_resumes_the_same_batch_after_a_restart(engine, stub):
    """The wait holds nothing but rows: a poll from a new task (or after a scheduler restart) picks up the
    batch the first one submitted; submitting again meanwhile creates nothing."""
    import time

    stub.delay = 0.4
    _ask_all(engine, stub, ["slow"])
    assert len(batch_transport.submit_pending(engine, api=_api(stub))) == 1
    assert batch_transport.poll_batches(engine, api=_api(stub))["open"] == 1
    assert batch_transport.submit_pending(engine, api=_api(stub)) == [] and stub.creates == 1
    assert batch_transport.collect_results(engine, api=_api(stub))["batches"] == 0  # nothing ended yet
    time.sleep(0.5)
    status = batch_transport.poll_batches(engine, api=_api(stub))
    assert (status["open"], status["ended"]) == (0, 1)
    assert batch_transport.collect_results(engine, api=_api(stub))["answered"] == 1
    assert _ask_all(engine, stub, ["slow"]) == ["answer to slow"] and stub.creates == 1
