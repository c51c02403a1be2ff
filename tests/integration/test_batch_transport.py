"""The batch transport (llm/batch_transport.py) on real PostgreSQL against the batch API stub over real HTTP
(replay/openai_batches.py), with the real LLMClient in batch mode recording what the cache cannot answer:
a lost create answer does not make a second batch, a partly failed batch re-asks only its failures, an
expired batch is submitted again a bounded number of times, and every answer's audit row carries the batch
price."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from support.batch_queue import ask_all, echo_stub

from deepscholar.llm import batch_results, batch_transport
from deepscholar.llm.batch_transport import BatchQueue
from deepscholar.llm.batches import OpenAIBatches
from deepscholar.llm.client import LLMClient, ParseError
from deepscholar.llm.prices import cost_usd

MODEL = "openai/gpt-4o-mini"  # a model litellm's table prices, with batch prices
QUEUE = BatchQueue("2025-05", f"llm:{MODEL}", "run-1")  # the month and judge config asking, and the run


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with echo_stub() as server:
        yield server


def _api(stub, **options):
    return lambda api_base: OpenAIBatches(stub.url, "test", **options)


def _ask_all(engine, stub, prompts, *, batch=True, queue=QUEUE) -> list[str | None]:
    """Each prompt through a fresh client: its answer, or None when it waits for a batch."""
    return ask_all(engine, MODEL, stub.url, prompts, queue if batch else None)


def _run_batches(engine, stub, queue=QUEUE, **options) -> dict:
    submitted = batch_transport.submit_pending(engine, queue, api=_api(stub))
    status = batch_transport.poll_batches(engine, queue, api=_api(stub))
    assert status["open"] == 0  # the stub answers at once (delay 0)
    return {"submitted": submitted, **batch_results.collect_results(engine, queue, api=_api(stub, **options))}


def _requests(engine, queue=QUEUE) -> dict[str, tuple[str, int]]:
    with engine.connect() as conn:
        return {h: (s, a) for h, s, a in conn.execute(sa.text(
            "SELECT request_hash, state, attempts FROM llm_batch_requests WHERE release_id = :release_id "
            "AND judge_config = :judge_config"), queue.key)}


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
    assert batch_transport.submit_pending(engine, QUEUE, api=_api(stub)) == [] and stub.creates == 1
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
        batch_transport.submit_pending(engine, QUEUE, api=_api(stub))
    assert stub.creates == 1 and len(stub.batches) == 1  # the provider made it; we never heard
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT state, provider_batch_id FROM llm_batches")).one() == ("creating", None)
    uploads = len(stub.files)
    # The task's retry: finds the batch by its metadata instead of creating another.
    assert len(batch_transport.submit_pending(engine, QUEUE, api=_api(stub))) == 1
    assert stub.creates == 1 and len(stub.batches) == 1 and len(stub.files) == uploads
    with engine.connect() as conn:
        key, batch_id = conn.execute(sa.text("SELECT batch_key, provider_batch_id FROM llm_batches")).one()
    assert stub.batches[batch_id]["metadata"] == {batch_transport.METADATA_KEY: key}
    assert batch_transport.poll_batches(engine, QUEUE, api=_api(stub))["ended"] == 1
    assert batch_results.collect_results(engine, QUEUE, api=_api(stub))["answered"] == 3
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
    monkeypatch.setattr(batch_results, "MAX_ATTEMPTS", 2)
    _ask_all(engine, stub, ["late"])
    stub.expire_batches = 1
    first = _run_batches(engine, stub)
    assert (first["answered"], first["retried"], first["failed"]) == (0, 1, 0)
    assert list(_requests(engine).values()) == [("pending", 1)]
    stub.expire_batches = 1
    second = _run_batches(engine, stub)  # the second submission expires too: no third
    assert (second["answered"], second["retried"], second["failed"]) == (0, 0, 1)
    assert list(_requests(engine).values()) == [("failed", 2)]
    assert batch_transport.submit_pending(engine, QUEUE, api=_api(stub)) == [] and stub.creates == 2
    with engine.connect() as conn:
        assert [r for (r,) in conn.execute(sa.text("SELECT provider_status FROM llm_batches"))] == ["expired"] * 2
    # The judge's item then ends unscored with the provider's reason, as a rejected request does directly.
    client = LLMClient(engine, MODEL, api_base=stub.url, api_key="test", batch=QUEUE)

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
    assert len(batch_transport.submit_pending(engine, QUEUE, api=_api(stub))) == 1
    assert batch_transport.poll_batches(engine, QUEUE, api=_api(stub))["open"] == 1
    assert batch_transport.submit_pending(engine, QUEUE, api=_api(stub)) == [] and stub.creates == 1
    assert batch_results.collect_results(engine, QUEUE, api=_api(stub))["batches"] == 0  # nothing ended yet
    time.sleep(0.5)
    status = batch_transport.poll_batches(engine, QUEUE, api=_api(stub))
    assert (status["open"], status["ended"]) == (0, 1)
    assert batch_results.collect_results(engine, QUEUE, api=_api(stub))["answered"] == 1
    assert _ask_all(engine, stub, ["slow"]) == ["answer to slow"] and stub.creates == 1


# --- issue 46: the queue is a month's, and a provider's output cannot stop it --------------------------------

def _lines_sent(stub) -> list[str]:
    """The question of every request the stub received in a batch (the last message's text)."""
    return [body["messages"][-1]["content"] for kind, body in stub.bodies if kind == "batch"]


def _batches(engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(
            "SELECT release_id, state FROM llm_batches ORDER BY created_at, batch_key"))]


def test_two_months_at_once_each_submits_waits_for_and_prices_only_its_own_requests(engine, stub):
    """Month A over its budget sends nothing, whoever steps next; month B's steps send B's requests only
    (counted at the server), its budget check counts B's only, and A's half-sent batch is A's to send."""
    from deepscholar.errors import OverBudget
    from deepscholar.evaluation.judging.batch_rounds import submit_within
    from deepscholar.evaluation.money.costs import predicted_pending_batch_cost
    from deepscholar.llm.spend import SpendLimit

    month_a, month_b = BatchQueue("2025-01", QUEUE.judge_config, "run-a"), BatchQueue("2025-02", QUEUE.judge_config,
                                                                                     "run-b")
    _ask_all(engine, stub, ["a1", "a2", "a3", "both"], queue=month_a)
    _ask_all(engine, stub, ["b1", "b2", "both"], queue=month_b)
    with engine.connect() as conn:
        (usd_a, _), (usd_b, _) = (predicted_pending_batch_cost(conn, q.release_id, q.judge_config)
                                  for q in (month_a, month_b))
    assert usd_a > 0 and usd_a == pytest.approx(usd_b * 4 / 3)  # each month's pending requests, not both's

    with pytest.raises(OverBudget, match="the next batch would cost about"):
        submit_within(engine, month_a, SpendLimit(usd_a / 2, "judging 2025-01"), api=_api(stub))
    assert stub.creates == 0 and stub.bodies == []
    # B within its budget: only B's questions reach the provider; A's still wait, unsent and unpaid.
    assert len(submit_within(engine, month_b, SpendLimit(usd_b * 2, "judging 2025-02"), api=_api(stub))) == 1
    assert sorted(_lines_sent(stub)) == ["b1", "b2", "both"]
    assert set(_requests(engine, month_a).values()) == {("pending", 0)}
    # A's batch whose create answer was lost stays A's: B's steps neither send it nor wait for it.
    stub.lose_creates = 1
    from deepscholar.errors import InfrastructureError

    with pytest.raises(InfrastructureError):
        submit_within(engine, month_a, SpendLimit(usd_a * 2, "judging 2025-01"), api=_api(stub))
    assert _batches(engine) == [("2025-02", "submitted"), ("2025-01", "creating")]
    assert batch_transport.submit_pending(engine, month_b, api=_api(stub)) == [] and stub.creates == 2
    status = batch_transport.poll_batches(engine, month_b, api=_api(stub))
    assert (status["open"], status["ended"], status["unsent"], status["pending"]) == (0, 1, 0, 0)
    assert batch_results.collect_results(engine, month_b, api=_api(stub))["answered"] == 3
    assert _ask_all(engine, stub, ["b1", "b2"], queue=month_b) == ["answer to b1", "answer to b2"]
    assert _batches(engine) == [("2025-02", "collected"), ("2025-01", "creating")]
    # A's own step adopts its batch (one create for it, not two) and collects it.
    assert len(batch_transport.submit_pending(engine, month_a, api=_api(stub))) == 1 and stub.creates == 2
    batch_transport.poll_batches(engine, month_a, api=_api(stub))
    assert batch_results.collect_results(engine, month_a, api=_api(stub))["answered"] == 4
    assert sorted(_lines_sent(stub)) == sorted(["a1", "a2", "a3", "both", "b1", "b2", "both"])


def test_a_wrong_shaped_line_is_its_requests_error_and_asked_again_the_rest_is_stored(engine, stub, monkeypatch):
    from deepscholar.replay.openai_batches import BAD_LINES

    monkeypatch.setattr(batch_results, "MAX_ATTEMPTS", 2)
    bad = {f"bad {kind}": kind for kind in BAD_LINES}
    prompts = ["good 1", *bad, "good 2", "always bad"]
    _ask_all(engine, stub, prompts)
    stub.bad_line_if = lambda body: bad.get(body["messages"][-1]["content"]) or (
        "usage_list" if body["messages"][-1]["content"] == "always bad" else None)
    first = _run_batches(engine, stub)
    assert (first["answered"], first["retried"], first["failed"], first["batches"]) == (2, len(bad) + 1, 0, 1)
    with engine.connect() as conn:
        errors = dict(conn.execute(sa.text(
            "SELECT request->'messages'->0->>'content', last_error FROM llm_batch_requests WHERE state = 'pending'"
        )).all())
        assert conn.execute(sa.text("SELECT state, n_answered, n_errored FROM llm_batches")).one() == (
            "collected", 2, len(bad) + 1)
    assert "`response` is a str" in errors["bad string_response"]
    assert "`choices` is not a list" in errors["bad choices_not_list"]
    assert "`usage` is not an object" in errors["bad usage_list"]
    assert "token count" in errors["bad tokens_as_strings"]
    assert "NUL" in errors["bad nul"] and "not JSON" in errors["bad not_json"]
    assert "over the 1000000 bytes" in errors["bad huge"]
    assert all(e.startswith("malformed answer line: ") for e in errors.values())
    # Asked again (within the attempts): the provider answers well this time, except the one always bad.
    n_bad = len(bad)
    bad.clear()
    second = _run_batches(engine, stub)
    assert (second["answered"], second["retried"], second["failed"]) == (n_bad, 0, 1)
    assert _ask_all(engine, stub, prompts[:-1]) == [f"answer to {p}" for p in prompts[:-1]]
    client = LLMClient(engine, MODEL, api_base=stub.url, api_key="test", batch=QUEUE)
    judged = client.ask([{"role": "user", "content": "always bad"}], str, purpose="test", max_tokens=None)
    assert not judged.scored and "`usage` is not an object" in judged.unscored_reason
    assert "2 submissions" in judged.unscored_reason


def test_a_line_holding_unicode_line_separators_is_one_line(engine, stub):
    """JSONL is split on \\n only: U+2028, U+2029 and U+0085 are legal unescaped inside a JSON string, and the
    stub sends them so."""
    prompts = ["line\u2028separator", "paragraph\u2029separator", "next\u0085line", "plain"]
    _ask_all(engine, stub, prompts)
    outcome = _run_batches(engine, stub)
    assert (outcome["answered"], outcome["retried"]) == (4, 0)
    output = b"".join(f["content"] for f in stub.files.values() if f["purpose"] == "batch_output")
    assert all(ch.encode() in output for ch in "\u2028\u2029\u0085")  # sent unescaped
    assert _ask_all(engine, stub, prompts) == [f"answer to {p}" for p in prompts]


def test_a_file_over_the_cap_keeps_its_whole_lines_and_asks_the_rest_again(engine, stub):
    prompts = [f"capped {i}" for i in range(10)]
    _ask_all(engine, stub, prompts)
    cap = 2600  # about five of the stub's answer lines (of some 480 bytes)
    answered = []
    for _ in range(2):  # within batch_results.MAX_ATTEMPTS (3)
        outcome = _run_batches(engine, stub, max_file_bytes=cap)
        assert outcome["failed"] == 0 and outcome["batches"] == 1
        answered.append(outcome["answered"])
    assert answered == [5, 5]
    assert _ask_all(engine, stub, prompts) == [f"answer to {p}" for p in prompts]


def test_a_slow_download_leaves_its_batch_for_later_and_the_other_batches_are_collected(engine, stub, monkeypatch):
    monkeypatch.setattr(batch_transport, "MAX_REQUESTS", 2)
    _ask_all(engine, stub, ["s1", "s2", "s3", "s4"])
    assert len(batch_transport.submit_pending(engine, QUEUE, api=_api(stub))) == 2
    assert batch_transport.poll_batches(engine, QUEUE, api=_api(stub))["ended"] == 2
    slow = _api(stub, timeout=0.3, max_file_bytes=10_000)  # a 0.31 s deadline; the stub sends a byte in 0.05 s
    stub.slow_downloads = 1
    first = batch_results.collect_results(engine, QUEUE, api=slow)
    assert (first["batches"], first["deferred"], first["answered"]) == (1, 1, 2)
    assert _ask_all(engine, stub, ["s1", "s2", "s3", "s4"]).count(None) == 2
    second = batch_results.collect_results(engine, QUEUE, api=slow)  # the provider answers in time again
    assert (second["batches"], second["deferred"], second["answered"]) == (1, 0, 2)
    assert _ask_all(engine, stub, ["s1", "s2", "s3", "s4"]) == [f"answer to s{i}" for i in range(1, 5)]
    # A download that never comes in time: after COLLECT_TRIES the batch is collected, its requests asked again.
    _ask_all(engine, stub, ["s5"])
    batch_transport.submit_pending(engine, QUEUE, api=_api(stub))
    batch_transport.poll_batches(engine, QUEUE, api=_api(stub))
    stub.slow_downloads = batch_results.COLLECT_TRIES
    tries = [batch_results.collect_results(engine, QUEUE, api=slow) for _ in range(batch_results.COLLECT_TRIES)]
    assert [t["deferred"] for t in tries] == [1] * (batch_results.COLLECT_TRIES - 1) + [0]
    assert tries[-1]["retried"] == 1
    with engine.connect() as conn:
        error = conn.execute(sa.text("SELECT last_error FROM llm_batch_requests WHERE state = 'pending'")).scalar_one()
    assert "could not be downloaded" in error
    assert _run_batches(engine, stub)["answered"] == 1 and _ask_all(engine, stub, ["s5"]) == ["answer to s5"]


def test_the_batch_list_is_read_a_bounded_number_of_pages(engine, stub):
    """A provider repeating its first page with `has_more` forever: a lost create's batch is still adopted
    (one create), and a search that finds nothing stops (and refuses to call it "not found")."""
    import threading

    from deepscholar.errors import InfrastructureError

    _ask_all(engine, stub, ["x"])
    stub.lose_creates = 1
    with pytest.raises(InfrastructureError):
        batch_transport.submit_pending(engine, QUEUE, api=_api(stub))
    stub.repeat_list_pages = True
    outcome: dict = {}

    def search() -> None:
        try:
            outcome["sent"] = batch_transport.submit_pending(engine, QUEUE, api=_api(stub))
            outcome["found"] = OpenAIBatches(stub.url, "test").find("deepscholar_batch_key", "none")
        except InfrastructureError as exc:
            outcome["error"] = str(exc)

    searching = threading.Thread(target=search, daemon=True)
    searching.start()
    searching.join(timeout=20)
    assert not searching.is_alive(), f"still listing after {stub.list_requests} pages"
    assert len(outcome["sent"]) == 1 and stub.creates == 1
    assert "not creating a second batch" in outcome["error"] and stub.list_requests <= 3
    # A batch older than the one looked for ends the listing at once.
    stub.repeat_list_pages, listed = False, stub.list_requests
    assert OpenAIBatches(stub.url, "test").find("deepscholar_batch_key", "none", since=time.time() + 60) is None
    assert stub.list_requests == listed + 1


def test_a_request_failed_for_good_in_one_run_is_asked_again_by_a_later_run(engine, stub, monkeypatch):
    monkeypatch.setattr(batch_results, "MAX_ATTEMPTS", 1)
    _ask_all(engine, stub, ["late"])
    stub.expire_batches = 1
    assert _run_batches(engine, stub)["failed"] == 1
    client = LLMClient(engine, MODEL, api_base=stub.url, api_key="test", batch=QUEUE)
    judged = client.ask([{"role": "user", "content": "late"}], str, purpose="test", max_tokens=None)
    assert not judged.scored and "batch_expired" in judged.unscored_reason  # the run that saw it fail
    assert _run_batches(engine, stub)["batches"] == 0  # ... which does not ask it again
    later = BatchQueue(QUEUE.release_id, QUEUE.judge_config, "run-2")
    assert _ask_all(engine, stub, ["late"], queue=later) == [None]  # asked again
    assert _requests(engine) == {next(iter(_requests(engine))): ("pending", 0)}
    assert _run_batches(engine, stub, later)["answered"] == 1
    assert _ask_all(engine, stub, ["late"], queue=later) == ["answer to late"] and stub.creates == 2


def test_collecting_holds_a_chunk_of_a_batch_file_in_memory_whatever_the_file_size(engine, stub):
    """An output file is streamed to disk and stored a chunk at a time: collecting one four times larger
    takes no more memory at its peak, and less than the file."""
    import tracemalloc

    stub.answer = lambda body: body["messages"][-1]["content"] + "y" * 900_000  # 0.9 MB a line, under its cap
    cost_usd(None, MODEL, 1, 1)  # litellm's price table loaded before measuring (megabytes, once a process)
    measured = []
    for n in (6, 24):
        _ask_all(engine, stub, [f"big {n} {i}" for i in range(n)])
        batch_transport.submit_pending(engine, QUEUE, api=_api(stub))
        batch_transport.poll_batches(engine, QUEUE, api=_api(stub))
        size = max(len(f["content"]) for f in stub.files.values() if f["purpose"] == "batch_output")
        tracemalloc.start()
        try:
            outcome = batch_results.collect_results(engine, QUEUE, api=_api(stub))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert outcome["answered"] == n
        measured.append((size, peak))
    (small, small_peak), (large, large_peak) = measured
    assert large > 20_000_000 and large > 3.5 * small
    assert large_peak < 1.5 * small_peak and large_peak < large / 1.5, measured
