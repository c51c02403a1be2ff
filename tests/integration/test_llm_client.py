"""LLMClient against a local OpenAI-compatible server over real HTTP: retries, re-asks, cache, concurrency.

Every test runs on both transports (llm/openai_compatible.py's direct path and litellm's): what the
client guarantees must not depend on which one carried the request.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub, RawText, first_user_text

from deepscholar.errors import InfrastructureError, MissingCredentials, UserError
from deepscholar.llm.cache import request_hash
from deepscholar.llm.client import LLMClient, ParseError, parse_json_array, parse_json_object, track_usage

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("each_transport")]  # HTTP stubs, real retries and backoff


def make_client(engine, fake: OpenAIStub, model: str = "openai/judge-a", **kwargs) -> LLMClient:
    kwargs = {"api_key": "test", "backoff_base": 0.01, **kwargs}
    return LLMClient(engine, model, api_base=fake.url, **kwargs)


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def llm_call_rows(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text("SELECT * FROM llm_calls")).mappings()]


def test_429_then_500_then_success_is_one_result_and_one_logged_call(engine, fake_llm):
    fake_llm.script = [429, 500, "hello"]
    client = make_client(engine, fake_llm)
    result = client.complete(user("greet"), purpose="test.retry")
    assert result.text == "hello" and not result.cached
    assert fake_llm.requests == 3
    assert len(fake_llm.server.log) == 3
    rows = llm_call_rows(engine)
    assert len(rows) == 1
    row = rows[0]
    assert row["request_hash"] == result.request_hash
    assert row["model"] == "openai/judge-a" and row["purpose"] == "test.retry"
    assert row["provider_model"] == "judge-a-2025-01-01" == result.provider_model
    assert (row["prompt_tokens"], row["completion_tokens"]) == (12, 5)
    assert row["latency_ms"] > 0 and row["response_text"] == "hello"
    assert row["cost_usd"] is None and result.cost_usd is None  # unpriced model: unknown, not 0
    assert row["request"]["params"] == {"temperature": 0, "seed": 0}
    # Deterministic defaults reach the provider; litellm's own retries stay off.
    assert all(b["temperature"] == 0 and b["seed"] == 0 for b in fake_llm.bodies)


def test_garbage_twice_then_valid_json_is_parsed_with_reasks_counted(engine, fake_llm):
    fake_llm.script = ["Sure! The answer is yes.", '{"a": 1', '```json\n{"a": 1}\n```']
    client = make_client(engine, fake_llm, max_reasks=2)
    judged = client.ask(user("give me a"), parse_json_object, purpose="test.reask", max_tokens=None)
    assert judged.value == {"a": 1} and judged.scored and judged.unscored_reason is None
    assert judged.calls == 3 and fake_llm.requests == 3
    last = fake_llm.bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert last[1]["content"] == "Sure! The answer is yes." and "not valid JSON" in last[2]["content"]


def test_garbage_every_time_is_unscored_with_the_parse_error(engine, fake_llm):
    fake_llm.default = lambda body: "I refuse to answer in JSON."
    client = make_client(engine, fake_llm, max_reasks=2)
    judged = client.ask(user("give me a"), parse_json_object, purpose="test.reask", max_tokens=None)
    assert judged.value is None and not judged.scored
    assert "not valid JSON" in judged.unscored_reason
    assert judged.calls == 3 and fake_llm.requests == 3


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_provider_down_past_the_retries_is_an_infrastructure_error_never_unscored(engine, fake_llm, status):
    import openai

    fake_llm.default = lambda body: status
    client = make_client(engine, fake_llm, max_retries=2)
    # A judge cannot be blamed for an outage: ask() raises (the task fails and is retried) instead of
    # leaving the item unscored.
    with pytest.raises(InfrastructureError, match=f"LLM provider openai/judge-a at {fake_llm.url} unavailable") as err:
        client.ask(user("anything"), parse_json_object, purpose="test.fail", max_tokens=None)
    cause = err.value.__cause__  # the provider's error, kept as the cause (litellm's subclass the SDK's)
    assert isinstance(cause, openai.APIStatusError) and cause.status_code == status
    assert fake_llm.requests == 3  # max_retries + 1
    with pytest.raises(InfrastructureError):
        client.complete(user("anything"), purpose="test.fail")
    assert fake_llm.requests == 6
    assert llm_call_rows(engine) == []  # failures are not cached


def test_a_200_that_is_not_json_is_an_outage_not_the_judges_answer(engine, fake_llm):
    """A proxy's login page is infrastructure: retried, then the task fails; nothing unscored, nothing cached."""
    fake_llm.default = lambda body: RawText("<html><body>Gateway login required</body></html>")
    client = make_client(engine, fake_llm, max_retries=1)
    with pytest.raises(InfrastructureError, match="unavailable"):
        client.ask(user("anything"), parse_json_object, purpose="test.html", max_tokens=None)
    assert fake_llm.requests == 2 and llm_call_rows(engine) == []


def test_both_transports_send_the_provider_the_same_request(engine, fake_llm, monkeypatch):
    """The direct path is a shortcut, not another client: the provider sees what litellm would send."""
    sent = {}
    for transport in ("direct", "litellm"):
        monkeypatch.setenv("DEEPSCHOLAR_LLM_TRANSPORT", transport)
        client = make_client(engine, fake_llm, extra_params={"max_tokens": 64})
        client.complete(user(f"same question via {transport}"), purpose="test.same",
                        response_format={"type": "json_object"})
        body = dict(fake_llm.bodies[-1])
        body["messages"] = [{**m, "content": m["content"].replace(transport, "X")} for m in body["messages"]]
        sent[transport] = body
    assert sent["direct"]["model"] == "judge-a"
    assert sent["direct"] == sent["litellm"]


def test_bad_request_is_unscored_but_a_bad_key_raises(engine, fake_llm):
    import openai

    fake_llm.script = [400, 401]
    client = make_client(engine, fake_llm)
    judged = client.ask(user("too long"), parse_json_object, purpose="test.fail", max_tokens=None)
    assert judged.value is None and "BadRequestError" in judged.unscored_reason
    with pytest.raises(openai.AuthenticationError):  # every item would fail the same way: stop the run
        client.ask(user("anything"), parse_json_object, purpose="test.fail", max_tokens=None)
    assert fake_llm.requests == 2  # neither is retried


def test_concurrency_never_exceeds_the_bound_and_order_is_kept(engine, fake_llm):
    fake_llm.delay = 0.2
    client = make_client(engine, fake_llm, concurrency=4)
    started = time.perf_counter()
    texts = client.map(lambda i: client.complete(user(f"q{i}"), purpose="test.map").text, range(20))
    elapsed = time.perf_counter() - started
    assert texts == [f"q{i}" for i in range(20)]
    assert fake_llm.requests == 20
    assert 1 < fake_llm.max_in_flight <= 4
    assert elapsed < 20 * 0.2  # really parallel


def test_rerun_makes_zero_requests_and_any_parameter_change_makes_one(engine, fake_llm):
    first = make_client(engine, fake_llm)
    fresh = [first.complete(user(f"p{i}"), purpose="test.cache") for i in range(3)]
    assert fake_llm.requests == 3

    again_client = make_client(engine, fake_llm)  # a new process would see the same: the cache is the DB
    again = [again_client.complete(user(f"p{i}"), purpose="test.cache") for i in range(3)]
    judged = again_client.ask(user("p0"), lambda text: text.upper(), purpose="test.cache", max_tokens=None)
    assert fake_llm.requests == 3 and len(fake_llm.server.log) == 3
    assert all(r.cached for r in again) and judged.value == "P0" and judged.calls == 1
    assert [(r.text, r.request_hash, r.provider_model, r.prompt_tokens) for r in again] == [
        (r.text, r.request_hash, r.provider_model, r.prompt_tokens) for r in fresh]

    warmer = again_client.complete(user("p0"), purpose="test.cache", temperature=0.5)
    assert fake_llm.requests == 4 and not warmer.cached
    assert fake_llm.bodies[-1]["temperature"] == 0.5
    other_model = make_client(engine, fake_llm, model="openai/judge-b").complete(user("p0"), purpose="test.cache")
    assert fake_llm.requests == 5 and not other_model.cached
    assert other_model.provider_model == "judge-b-2025-01-01"
    assert len(llm_call_rows(engine)) == 5


def test_tool_calls_are_returned_in_the_message_and_cached(engine, fake_llm):
    call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "rag"}'}}
    fake_llm.script = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    client = make_client(engine, fake_llm)
    fresh = client.complete(user("find papers"), purpose="test.tools", tools=tools, tool_choice="auto")
    cached = client.complete(user("find papers"), purpose="test.tools", tools=tools, tool_choice="auto")
    assert fresh.text == "" and fresh.message["tool_calls"][0]["function"]["name"] == "search"
    assert cached.cached and cached.message == fresh.message
    assert fake_llm.requests == 1 and fake_llm.bodies[0]["tools"] == tools
    assert "_skip_mcp_handler" not in fake_llm.bodies[0]


def test_identical_concurrent_requests_reach_the_server_once(engine, fake_llm):
    fake_llm.delay = 0.2
    client = make_client(engine, fake_llm, concurrency=4)
    results = client.map(lambda _: client.complete(user("same"), purpose="test.dedupe"), range(4))
    assert fake_llm.requests == 1
    assert sum(not r.cached for r in results) == 1


def test_identical_concurrent_asks_are_one_request_and_distinct_asks_are_one_each(engine, fake_llm):
    """Single flight (llm/cache.py): the asks that arrive while the first is in flight wait for its answer
    and count as cached calls; different questions are never merged."""
    fake_llm.delay = 0.3
    fake_llm.default = lambda body: json.dumps({"about": first_user_text(body)})
    client = make_client(engine, fake_llm, concurrency=8)
    together = threading.Barrier(8, timeout=10)

    def ask(question: str):
        together.wait()  # all eight are in flight at once
        return client.ask(user(question), parse_json_object, purpose="test.flight", max_tokens=None)

    with track_usage() as usage:
        same = client.map(lambda _: ask("the same question"), range(8))
    assert fake_llm.requests == 1 and len(fake_llm.server.log) == 1
    assert [j.value for j in same] == [{"about": "the same question"}] * 8
    assert all(j.scored and j.calls == 1 for j in same)
    assert (usage.calls, usage.cached_calls, usage.requests, usage.attempts) == (8, 7, 1, 1)

    distinct = client.map(lambda i: ask(f"question {i}"), range(8))
    assert fake_llm.requests == 1 + 8
    assert [j.value for j in distinct] == [{"about": f"question {i}"} for i in range(8)]
    assert len(client._flights) == 0  # nothing kept once the flights ended
    assert len(llm_call_rows(engine)) == 9


def test_a_failed_request_in_flight_is_not_shared_the_waiter_asks_itself(engine, fake_llm):
    fake_llm.delay = 0.3
    fake_llm.script = [400]  # the first request is rejected; the next one is answered
    fake_llm.default = lambda body: '{"a": 1}'
    client = make_client(engine, fake_llm, concurrency=2)
    together = threading.Barrier(2, timeout=10)

    def ask(_):
        together.wait()
        return client.ask(user("rejected once"), parse_json_object, purpose="test.flight", max_tokens=None)

    first, second = client.map(ask, range(2))
    outcomes = sorted([first, second], key=lambda j: j.scored)
    assert not outcomes[0].scored and "BadRequestError" in outcomes[0].unscored_reason
    assert outcomes[1].value == {"a": 1}
    assert fake_llm.requests == 2  # the waiter's own request, after the leader's failed
    assert len(client._flights) == 0


# --- pure functions: no server, no database --------------------------------------------------------

BASE = {"model": "openai/m", "api_base": "http://x/v1", "messages": [{"role": "user", "content": "hi"}],
        "params": {"temperature": 0, "seed": 0}}


@pytest.mark.parametrize("change", [
    {"model": "openai/m2"},
    {"api_base": "http://y/v1"},
    {"messages": [{"role": "user", "content": "hi!"}]},
    {"params": {"temperature": 0.1, "seed": 0}},
    {"params": {"temperature": 0, "seed": 1}},
    {"params": {"temperature": 0, "seed": 0, "max_tokens": 10}},
    {"params": {"temperature": 0, "seed": 0, "tools": [{"type": "function", "function": {"name": "f"}}]}},
    {"params": {"temperature": 0, "seed": 0, "response_format": {"type": "json_object"}}},
    {"params": {"temperature": 0, "seed": 0, "tool_choice": "auto"}},
])
def test_request_hash_changes_with_every_input(change):
    assert request_hash(**BASE) != request_hash(**{**BASE, **change})


def test_request_hash_ignores_key_order_and_none_params():
    reordered = {**BASE, "params": {"seed": 0, "temperature": 0, "stop": None}}
    assert request_hash(**BASE) == request_hash(**reordered)


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', {"a": 1}),
    ('  ```json\n{"a": [1, 2]}\n```  ', {"a": [1, 2]}),
    ('```\n{"a": true}\n```', {"a": True}),
])
def test_parse_json_object_accepts_bare_or_fenced_objects(text, expected):
    assert parse_json_object(text) == expected


@pytest.mark.parametrize("text", ["", "[1, 2]", "Here it is: {\"a\": 1}", '{"a": 1} thanks', "```json\n{\"a\"\n```",
                                  "null"])
def test_parse_json_object_rejects_everything_else(text):
    with pytest.raises(ParseError):
        parse_json_object(text)


def test_parse_json_array_rejects_objects():
    assert parse_json_array('["x"]') == ["x"]
    with pytest.raises(ParseError, match="expected a JSON array"):
        parse_json_array('{"x": 1}')


def test_a_missing_api_key_fails_at_once_naming_the_variable(engine, fake_llm, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient(engine, "openai/judge-a", api_base=fake_llm.url, backoff_base=0.01)
    started = time.monotonic()
    with pytest.raises(MissingCredentials, match="^OPENAI_API_KEY is not set") as err:
        client.ask(user("is this ok?"), parse_json_object, purpose="test.no_key", max_tokens=None)
    assert isinstance(err.value, UserError) and err.value.variable == "OPENAI_API_KEY"
    assert fake_llm.requests == 0 and time.monotonic() - started < 5
    # A call already in llm_calls needs no key: nothing is sent.
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    first = LLMClient(engine, "openai/judge-a", api_base=fake_llm.url).complete(user("cached"), purpose="t")
    monkeypatch.delenv("OPENAI_API_KEY")
    again = LLMClient(engine, "openai/judge-a", api_base=fake_llm.url).complete(user("cached"), purpose="t")
    assert again.cached and again.text == first.text and fake_llm.requests == 1


@pytest.mark.parametrize("concurrency", [1, 16])
def test_usage_tracking_sees_every_call_made_in_the_worker_threads(engine, fake_llm, concurrency):
    """Counts, tokens and cost in track_usage() against the stub's own log, at any concurrency."""
    import litellm

    fake_llm.model_suffix = ""  # served as gpt-4o-mini: a model litellm prices
    fake_llm.script = [429]  # one retried attempt: an attempt, not a call
    client = make_client(engine, fake_llm, model="openai/gpt-4o-mini", concurrency=concurrency)
    with track_usage() as usage:
        client.map(lambda i: client.complete(user(f"u{i}"), purpose="test.usage"), range(40))
        # nested fan-out, as a system's filter stage inside map() does
        client.map(lambda i: client.map(lambda j: client.complete(user(f"n{i}.{j}"), purpose="test.usage"),
                                        range(3)), range(4))
        client.complete(user("u0"), purpose="test.usage")  # replayed from llm_calls
    answered = fake_llm.requests - 1  # the 429
    assert answered == 40 + 12
    assert (usage.calls, usage.cached_calls, usage.requests, usage.attempts) == (53, 1, answered, answered + 1)
    assert usage.request_prompt_tokens == 12 * answered and usage.request_completion_tokens == 5 * answered
    assert (usage.prompt_tokens, usage.completion_tokens) == (12 * 53, 5 * 53)
    unit = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=12, completion_tokens=5))
    logged = sum(r["cost_usd"] for r in llm_call_rows(engine))
    assert unit > 0 and usage.request_cost_usd == pytest.approx(unit * answered) == pytest.approx(logged)
    assert usage.cost_usd == pytest.approx(unit * 53)


def test_empty_choices_are_reasked_then_unscored_not_raised(engine, httpserver):
    """A provider answering 200 with no choice gave no verdict: the judge's miss, not an outage."""
    httpserver.expect_request("/v1/chat/completions").respond_with_json(
        {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [],
         "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}})
    client = LLMClient(engine, "openai/m", api_base=httpserver.url_for("/v1"), api_key="test", backoff_base=0.01)
    judged = client.ask(user("verdict?"), parse_json_object, purpose="test.empty", max_tokens=None)
    assert judged.unscored_reason == "unparseable after 3 answers: empty answer" and judged.calls == 3
    assert len(httpserver.log) == 3
