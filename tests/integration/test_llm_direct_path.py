"""The direct OpenAI-compatible path stays light: no litellm import, litellm's prices all the same.

A judge task on the direct path used to import litellm (seconds of start-up) only to check the API key
and to price each answer; both now read what litellm would without importing it. The OpenAI SDK is
imported only to raise its exception classes when a request fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.openai_stub import OpenAIStub

from deepscholar.errors import MissingCredentials
from deepscholar.llm import prices
from deepscholar.llm.client import LLMClient

# Models the price table knows, as served (dated snapshots) and as requested, with and without a prefix.
PRICED = ["gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o", "gpt-4.1", "gpt-4.1-mini", "openai/gpt-4o-mini",
          "o3-mini"]


@pytest.mark.parametrize("model", PRICED)
def test_prices_match_litellms_own_cost_per_token(model):
    import litellm

    expected = sum(litellm.cost_per_token(model=model, prompt_tokens=1234, completion_tokens=567))
    assert expected > 0
    assert prices.cost_usd(model, "openai/unknown-judge", 1234, 567) == pytest.approx(expected)


def test_an_unpriced_model_has_no_price_not_zero():
    assert prices.cost_usd("bench-judge", "openai/bench-judge", 10, 5) is None
    assert prices.cost_usd(None, "openai/gpt-4o-mini", None, 5) is None  # no token counts: unknown


def test_a_judge_call_on_the_direct_path_imports_neither_litellm_nor_the_sdk(engine):
    """In a fresh process: credentials checked, one answer received, priced and logged; litellm unimported."""
    script = """
import json, sys
from deepscholar import db
from deepscholar.llm.client import LLMClient
client = LLMClient(db.get_engine(sys.argv[1]), "openai/gpt-4o-mini", api_base=sys.argv[2])
client.check_credentials()
result = client.complete([{"role": "user", "content": "direct path, priced"}], purpose="test.direct")
print(json.dumps({"litellm": "litellm" in sys.modules, "openai": "openai" in sys.modules, "cost": result.cost_usd, "cached": result.cached}))
"""
    with OpenAIStub() as stub:
        stub.model_suffix = ""  # served as gpt-4o-mini: a model the price table knows
        env = {**os.environ, "OPENAI_API_KEY": "test", "DEEPSCHOLAR_LLM_TRANSPORT": "direct"}
        done = subprocess.run([sys.executable, "-c", script, engine.url.render_as_string(hide_password=False),
                               stub.url], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    import litellm

    expected = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=12, completion_tokens=5))
    # Neither litellm nor the OpenAI SDK is imported on a call that succeeds (a second each, cold).
    assert out == {"litellm": False, "openai": False, "cost": pytest.approx(expected), "cached": False}


def test_a_missing_key_on_the_direct_path_is_named_before_any_request(engine, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub() as stub:
        client = LLMClient(engine, "openai/judge-a", api_base=stub.url)
        with pytest.raises(MissingCredentials, match="OPENAI_API_KEY"):
            client.check_credentials()
        assert stub.requests == 0
