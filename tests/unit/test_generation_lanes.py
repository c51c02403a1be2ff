"""Generation lanes: a system's LLM provider decides the Airflow pool its reports are written in."""

import pytest

from deepscholar.orchestration import GENERATION_LANES, lane_pool, provider_lane
from deepscholar.systems.generation import pairs_by_lane, system_lane


@pytest.mark.parametrize(("model", "lane"), [
    ("openai/gpt-4.1", "openai"), ("gpt-4o", "openai"), ("o3-mini", "openai"), ("azure/my-deployment", "openai"),
    ("anthropic/claude-sonnet-4", "anthropic"), ("claude-3-5-haiku", "anthropic"),
    ("gemini/gemini-2.5-pro", "gemini"), ("vertex_ai/gemini-2.0-flash", "gemini"),
    ("ollama/llama3", "local"), ("hosted_vllm/qwen", "local"),
    ("mistral/mistral-large", "other"), ("some-unknown-model", "other"), (None, "offline"), ("", "offline"),
])
def test_provider_lane(model, lane):
    assert provider_lane(model) == lane


def test_systems_without_a_model_run_offline():
    assert system_lane("extractive", {}) == "offline"
    assert system_lane("external", {"endpoint": "http://x"}) == "offline"
    assert system_lane("deepscholar_base", {"model": "anthropic/claude-sonnet-4"}) == "anthropic"


def test_lane_pools_are_the_provider_pools():
    assert lane_pool("offline") == "default_pool"
    assert [lane_pool(lane) for lane in GENERATION_LANES[1:]] == [
        "llm_openai", "llm_anthropic", "llm_gemini", "llm_local", "llm_other"]


def test_pairs_by_lane_gives_every_lane_its_own_batches(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_OFFLINE_BATCH", "1")
    pairs = [{"system_id": f"s{i}", "arxiv_id": str(i), "lane": "openai" if i % 2 else "offline"} for i in range(5)]
    lanes = pairs_by_lane(pairs, max_tasks=2)
    assert set(lanes) == set(GENERATION_LANES)
    assert sum(map(len, lanes["offline"])) == 3 and len(lanes["offline"]) == 2  # batched under the cap
    assert [p["system_id"] for b in lanes["openai"] for p in b] == ["s1", "s3"]
    assert lanes["anthropic"] == []
    with pytest.raises(ValueError, match="unknown lanes"):
        pairs_by_lane([{"system_id": "x", "arxiv_id": "1", "lane": "mars"}])


def test_offline_pairs_go_many_to_a_task_llm_pairs_one():
    from deepscholar.orchestration import DEFAULT_OFFLINE_BATCH, lane_batch_size

    pairs = [{"system_id": f"s{i % 3}", "arxiv_id": str(i), "lane": "offline" if i % 4 else "openai"}
             for i in range(200)]
    lanes = pairs_by_lane(pairs)
    assert all(len(b) == DEFAULT_OFFLINE_BATCH for b in lanes["offline"][:-1])
    assert len(lanes["offline"]) == -(-150 // DEFAULT_OFFLINE_BATCH)
    assert all(len(b) == 1 for b in lanes["openai"]) and len(lanes["openai"]) == 50
    assert lane_batch_size("offline", {"DEEPSCHOLAR_OFFLINE_BATCH": "5"}) == 5
    assert lane_batch_size("gemini", {"DEEPSCHOLAR_OFFLINE_BATCH": "5"}) == 1
    with pytest.raises(ValueError, match="DEEPSCHOLAR_OFFLINE_BATCH"):
        lane_batch_size("offline", {"DEEPSCHOLAR_OFFLINE_BATCH": "many"})
