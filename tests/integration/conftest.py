"""Fixtures the integration tests of the LLM client share (tests/support/openai_stub.py is the stub itself)."""

from __future__ import annotations

import pytest
from support.openai_stub import OpenAIStub


@pytest.fixture(params=["direct", "litellm"])
def each_transport(request, monkeypatch):
    """The test once per way an `openai/<model>` request at an api_base travels: the direct httpx path and
    litellm's (DEEPSCHOLAR_LLM_TRANSPORT). Use with `pytest.mark.usefixtures("each_transport")`."""
    monkeypatch.setenv("DEEPSCHOLAR_LLM_TRANSPORT", request.param)
    return request.param


@pytest.fixture
def fake_llm():
    """A started stub; afterwards its answer functions' errors are raised and its host's breaker is reset."""
    from deepscholar.http_guard import BREAKER, host_of

    with OpenAIStub() as stub:
        yield stub
    stub.raise_errors()
    BREAKER.reset(host_of(stub.url))
