"""LLMReleaseJudge over real HTTP against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import re

import pytest
from support.openai_stub import OpenAIStub

from deepscholar.llm.client import LLMClient
from deepscholar.release.judging import LLMReleaseJudge, Nugget, QueryContext, ReferenceContext

pytestmark = pytest.mark.slow  # the real LLMClient (litellm import, seconds per process) against an HTTP stub

QUERY = QueryContext(
    arxiv_id="2501.00001",
    title="Retrieval-Augmented Generation for Citing Research Papers",
    abstract="We study retrieval-augmented generation for writing related-work sections.",
    section_text=("RAG conditions a generator on retrieved passages [@lewis2020]. "
                  "It is implemented in PyTorch [@paszke2019; @lewis2020]."),
)
REFS = [
    ReferenceContext("lewis2020", "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks",
                     ["Patrick Lewis"], "We explore RAG models."),
    ReferenceContext("paszke2019", "PyTorch", None, None),
    ReferenceContext("broken2021", "A paper the judge cannot answer about"),
]
ROUND_1 = ["RAG conditions generation on retrieved passages", "RAG is implemented in PyTorch"]
ROUND_2 = ["rag conditions generation on retrieved passages.", "Retrieval helps knowledge-intensive tasks"]


class ScriptedJudge:
    """Answers by reading the prompt, like a judge would; the stub's `script` is served first, in order."""

    def __init__(self, stub: OpenAIStub) -> None:
        self.stub = stub
        self.labels = ['["vital", "okay", "vital"]']  # answered in turn; the last one repeats
        stub.default = self.answer

    @property
    def url(self) -> str:
        return self.stub.url

    @property
    def bodies(self) -> list[dict]:
        return self.stub.bodies

    def answer(self, body: dict) -> str:
        prompt = body["messages"][0]["content"]
        if key := re.search(r"marker key: @(\S+)\)", prompt):
            return {"lewis2020": '{"important": true, "reason": "the method the paper builds on"}',
                    "paszke2019": '```json\n{"important": false, "reason": "a tool, substitutable"}\n```',
                    }.get(key.group(1), "It is quite important, I would say.")
        if "Nuggets found so far" in prompt:
            if "(none yet)" in prompt:
                return json.dumps(ROUND_1)
            return "[]" if ROUND_2[1] in prompt else json.dumps(ROUND_2)
        if "Label each nugget" in prompt:
            return self.labels.pop(0) if len(self.labels) > 1 else self.labels[0]
        raise AssertionError(f"unexpected prompt: {prompt[:200]}")


@pytest.fixture
def judge_server():
    with OpenAIStub(model_suffix="", usage=(100, 10)) as stub:
        yield ScriptedJudge(stub)
    stub.raise_errors()


def make_judge(engine, server) -> LLMReleaseJudge:
    client = LLMClient(engine, "openai/judge-model", api_base=server.url, api_key="test", concurrency=4,
                       max_reasks=2, backoff_base=0.01)
    return LLMReleaseJudge(client)


def test_config_id_names_model_and_prompt_versions(engine, judge_server):
    assert make_judge(engine, judge_server).config_id == (
        "llm:openai/judge-model:importance_v2+nuggetize_v2+nugget_labels_v2")


def test_importance_one_call_per_reference_and_garbage_is_unscored(engine, judge_server):
    labels = make_judge(engine, judge_server).label_importance(QUERY, REFS)
    assert [j.value for j in labels] == [True, False, None]
    assert labels[0].explanation == "the method the paper builds on" == labels[0].reason
    assert labels[0].calls == 1
    assert labels[1].explanation == "a tool, substitutable"
    assert not labels[2].scored and "not valid JSON" in labels[2].unscored_reason
    assert labels[2].calls == 3  # the question and two re-asks, then unscored — never a default False
    assert len(judge_server.bodies) == 5
    first = judge_server.bodies[0]["messages"][0]["content"]
    assert "[@lewis2020]" in first and QUERY.abstract in first  # the importance judge sees where it is cited


def test_nuggetize_extracts_until_nothing_new_then_labels(engine, judge_server):
    judged = make_judge(engine, judge_server).nuggetize(QUERY)
    assert judged.scored
    assert judged.value == [
        Nugget("RAG conditions generation on retrieved passages", "vital"),
        Nugget("RAG is implemented in PyTorch", "okay"),
        Nugget("Retrieval helps knowledge-intensive tasks", "vital"),
    ]
    assert judged.calls == 4 and len(judge_server.bodies) == 4  # rounds: 2 with news + 1 empty, then labels
    assert "3 rounds" in judged.explanation
    prompts = [b["messages"][0]["content"] for b in judge_server.bodies]
    assert all("[@" not in p for p in prompts)  # citation markers are noise for nuggets
    assert "1. RAG conditions generation on retrieved passages" in prompts[1]

    again = make_judge(engine, judge_server).nuggetize(QUERY)
    assert again == judged and len(judge_server.bodies) == 4  # re-run: answered by llm_calls


def test_label_count_mismatch_is_reasked(engine, judge_server):
    judge_server.labels = ['["vital", "okay"]', '["okay", "okay", "vital"]']
    judged = make_judge(engine, judge_server).nuggetize(QUERY)
    assert judged.scored and [n.importance for n in judged.value] == ["okay", "okay", "vital"]
    assert judged.calls == 3 + 2
    correction = judge_server.bodies[-1]["messages"]
    assert len(correction) == 3 and "expected exactly 3 labels, got 2" in correction[-1]["content"]


def test_labels_never_matching_make_the_query_unscored(engine, judge_server):
    judge_server.labels = ['["vital", "okay"]']
    judged = make_judge(engine, judge_server).nuggetize(QUERY)
    assert judged.value is None and judged.calls == 3 + 3
    assert judged.unscored_reason.startswith("nugget labelling:") and "exactly 3 labels" in judged.unscored_reason


def test_unparseable_extraction_round_makes_the_query_unscored(engine, judge_server):
    judge_server.stub.script = ["Here are the nuggets: RAG, DPR."] * 3
    judged = make_judge(engine, judge_server).nuggetize(QUERY)
    assert judged.value is None and judged.calls == 3
    assert judged.unscored_reason.startswith("nugget extraction round 1:")
    assert "not valid JSON" in judged.unscored_reason
