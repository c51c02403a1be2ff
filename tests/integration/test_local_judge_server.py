"""The local judge server (`make localjudge`) starts and answers a chat completion the OpenAI way.

Skips without .venv-localjudge, fails under CI=true (support/llama_server.py).
"""

from __future__ import annotations

import httpx
import pytest
from support.llama_server import MODEL_ALIAS, local_judge_server

pytestmark = pytest.mark.slow  # starts a llama.cpp server and loads a model (a few seconds on two cores)


def test_the_server_answers_one_chat_completion_within_its_token_budget(tmp_path):
    max_tokens = 24
    with local_judge_server(log_path=tmp_path / "llama_server.log") as api_base:
        assert api_base.startswith("http://127.0.0.1:") and api_base.endswith("/v1")
        models = httpx.get(f"{api_base}/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == [MODEL_ALIAS]
        response = httpx.post(f"{api_base}/chat/completions", timeout=120, json={
            "model": MODEL_ALIAS,
            "messages": [{"role": "system", "content": "You are a careful reviewer."},
                         {"role": "user", "content": "Is the sky blue on a clear day? Answer yes or no."}],
            "max_tokens": max_tokens,
            "temperature": 0,
        })
    assert response.status_code == 200, response.text
    body = response.json()
    choice = body["choices"][0]
    assert isinstance(choice["message"]["content"], str)
    assert 0 < body["usage"]["completion_tokens"] <= max_tokens
    assert choice["finish_reason"] in ("stop", "length")
