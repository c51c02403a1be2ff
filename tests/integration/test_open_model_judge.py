"""What a self-served open model needs from the client, against a local OpenAI-compatible server over real
HTTP on both transports: every judge question's answer budget, constrained output, a slow server told apart
from a dead one, and per-model timeout and concurrency (DEEPSCHOLAR_LLM_SERVING)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.openai_stub import OpenAIStub

from deepscholar.errors import InfrastructureError, ProviderTooSlow
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.http_guard import BREAKER, host_of
from deepscholar.llm import openai_compatible
from deepscholar.llm.client import LLMClient, parse_json_object

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}


pytestmark = pytest.mark.usefixtures("each_transport")


def client_of(engine, fake_llm: OpenAIStub, **kwargs) -> LLMClient:
    return LLMClient(engine, "openai/small", api_base=fake_llm.url, api_key="test",
                     **{"backoff_base": 0.01, **kwargs})


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_an_answer_cut_at_its_budget_is_re_asked_then_unscored_with_the_reason(engine, fake_llm):
    rambling = '{"ok": true, "reason": "' + "and so on " * 400 + '"}'
    fake_llm.default = lambda body: rambling
    judged = client_of(engine, fake_llm, max_reasks=1).ask(user("is it ok?"), parse_json_object, purpose="test.budget",
                                                         max_tokens=40)
    assert not judged.scored and judged.calls == 2 == fake_llm.requests
    assert "cut at its budget of 40 tokens" in judged.unscored_reason
    assert all(body["max_tokens"] == 40 for body in fake_llm.bodies)
    assert "cut at its budget" in fake_llm.bodies[1]["messages"][-1]["content"]  # the re-ask says why
    # A short answer under the same budget is scored; no budget, no max_tokens sent.
    fake_llm.default = lambda body: '{"ok": true}'
    assert client_of(engine, fake_llm).ask(user("short?"), parse_json_object, purpose="test.budget",
                                         max_tokens=40).value == {"ok": True}
    client_of(engine, fake_llm).ask(user("free?"), parse_json_object, purpose="test.budget", max_tokens=None)
    assert "max_tokens" not in fake_llm.bodies[-1]


def test_a_server_that_ignores_the_budget_is_still_held_to_it(engine, fake_llm):
    fake_llm.default = lambda body: '{"ok": true}'
    fake_llm.usage = (12, 900)  # the answer parses, but the server says it took 900 tokens
    judged = client_of(engine, fake_llm, max_reasks=0).ask(user("q"), parse_json_object, purpose="test.budget",
                                                         max_tokens=50)
    assert not judged.scored and "took 900 tokens, over its budget of 50" in judged.unscored_reason


def test_constrained_output_sends_the_schema_and_is_another_question(engine, fake_llm):
    fake_llm.default = lambda body: '{"ok": true}'
    free = client_of(engine, fake_llm).ask(user("q"), parse_json_object, purpose="metric.x", max_tokens=30,
                                         schema=SCHEMA)
    assert "response_format" not in fake_llm.bodies[-1]  # a schema is sent only by a constrained client
    constrained = client_of(engine, fake_llm, constrained="json_schema").ask(
        user("q"), parse_json_object, purpose="metric.x", max_tokens=30, schema=SCHEMA)
    sent = fake_llm.bodies[-1]["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "metric_x", "schema": SCHEMA, "strict": True}}
    assert fake_llm.requests == 2 and free.value == constrained.value  # not answered from the other's cache
    client_of(engine, fake_llm, constrained="json_object").ask(user("q"), parse_json_object, purpose="metric.x",
                                                             max_tokens=30, schema=SCHEMA)
    assert fake_llm.bodies[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA}


def test_a_busy_server_is_told_from_a_dead_one_and_not_piled_on(engine, fake_llm):
    """One slot, answers taking 1.5 s, a 0.4 s timeout: the server answers its models endpoint, so the
    client says it is busy (naming the settings), takes a request out of flight, sends the timed-out
    prompt once more only, and the host's breaker counts nothing against it."""
    fake_llm.slots, fake_llm.delay = 1, 1.5
    fake_llm.default = lambda body: '{"ok": true}'
    client = client_of(engine, fake_llm, timeout=0.4, concurrency=2, max_retries=3)
    started = time.monotonic()
    with pytest.raises(ProviderTooSlow) as err:
        client.ask(user("slow?"), parse_json_object, purpose="metric.x", max_tokens=30)
    message = str(err.value)
    assert "answers, but too slowly" in message and "busy, not down" in message
    assert "DEEPSCHOLAR_LLM_SERVING" in message and "--timeout" in message and "--concurrency" in message
    assert "unavailable" not in message
    assert fake_llm.requests == 2, "the timed-out prompt is sent once more, not max_retries more times"
    assert fake_llm.models_probes == 2 and client._in_flight.slots == 1
    assert BREAKER.failures_of(host_of(fake_llm.url)) == 0
    assert time.monotonic() - started < 5


def test_a_server_silent_to_the_probe_while_generating_is_busy_not_down(engine, fake_llm, monkeypatch):
    """llama-cpp-python lists its models only between generations: while the timed-out prompt is still
    generating, the probe's connection is taken and held. That is a busy server too: one resend, then
    ProviderTooSlow saying so, and nothing counted against the host."""
    monkeypatch.setattr(openai_compatible, "PROBE_SECONDS", 0.3)
    fake_llm.slots, fake_llm.delay, fake_llm.models_between_generations = 1, 1.5, True
    fake_llm.default = lambda body: '{"ok": true}'
    client = client_of(engine, fake_llm, timeout=0.4, concurrency=2, max_retries=3)
    with pytest.raises(ProviderTooSlow) as err:
        client.ask(user("slow?"), parse_json_object, purpose="metric.x", max_tokens=30)
    message = str(err.value)
    assert "took a probe's connection but did not answer" in message and "busy generating" in message
    assert "unavailable" not in message
    assert fake_llm.requests == 2 and fake_llm.models_probes == 2
    assert BREAKER.failures_of(host_of(fake_llm.url)) == 0


def test_a_server_that_refuses_the_probe_is_down():
    """The other side of the rule: a refused connection or a 5xx is no probe answer at all."""
    with OpenAIStub() as gone:
        url = gone.url
    assert openai_compatible.probe(url, "test", timeout=0.5) is None
    with OpenAIStub() as failing:
        failing.server.clear()
        failing.server.expect_request("/v1/models", method="GET").respond_with_data("down", status=503)
        assert openai_compatible.probe(failing.url, "test", timeout=0.5) is None
        failing.server.clear()
        failing.server.expect_request("/v1/models", method="GET").respond_with_data("no key", status=401)
        answered = openai_compatible.probe(failing.url, "test", timeout=0.5)
        assert answered is not None and answered.answered


def test_a_dead_server_is_still_unavailable(engine):
    with OpenAIStub() as gone:
        url = gone.url
    client = LLMClient(engine, "openai/small", api_base=url, api_key="test", backoff_base=0.01, max_retries=1,
                       timeout=2)
    with pytest.raises(InfrastructureError, match="unavailable") as err:
        client.ask(user("anyone?"), parse_json_object, purpose="metric.x", max_tokens=30)
    assert not isinstance(err.value, ProviderTooSlow)
    BREAKER.reset(host_of(url))


def test_per_model_serving_sets_the_timeout_and_caps_the_requests_in_flight(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_LLM_SERVING", json.dumps(
        {"openai/small": {"timeout_seconds": 240, "concurrency": 1}, "openai/other": {"concurrency": 3}}))
    monkeypatch.setenv("DEEPSCHOLAR_LLM_TIMEOUT_SECONDS", "30")
    fake_llm.delay = 0.2
    client = client_of(engine, fake_llm, concurrency=8)
    assert client.timeout == 240 and client.concurrency == 1
    threads = [threading.Thread(target=client.complete, args=(user(f"q{i}"),), kwargs={"purpose": "t"})
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_llm.requests == 4 and fake_llm.max_in_flight == 1
    # Another model keeps the general timeout; a caller's explicit timeout wins over the entry.
    assert LLMClient(engine, "openai/other", api_base=fake_llm.url, concurrency=8).timeout == 30
    assert LLMClient(engine, "openai/other", api_base=fake_llm.url, concurrency=8).concurrency == 3
    assert client_of(engine, fake_llm, timeout=5).timeout == 5


def test_the_judge_config_names_its_constrained_output():
    spec = JudgeSpec.parse("openai/small;output=json_schema", {"nugget_coverage": "openai/big"})
    assert spec.output == "json_schema"
    assert spec.config_id == "llm:openai/small;output=json_schema;nugget_coverage=openai/big"
    assert JudgeSpec.parse(spec.config_id) == spec
    assert JudgeSpec.parse("openai/small").config_id == "llm:openai/small"
    for bad in ("openai/small;output=grammar", "local;output=json_schema", "openai/small;output"):
        with pytest.raises(Exception, match="output|option|constrained"):
            JudgeSpec.parse(bad)
