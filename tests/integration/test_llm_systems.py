"""deepscholar_base and search_agent over real HTTP against the shared OpenAI stub, with an in-memory search.

The stub answers like a cooperative model would, by reading the prompt, so the tests can count the
calls each stage makes against the design (deepscholar_base module docstring) and check that every
[n] in a report resolves to a source carrying the snippet the model saw.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime

import pytest
from support.openai_stub import OpenAIStub, first_user_text, tool_call, tool_calls_message

from deepscholar.errors import SystemFailure
from deepscholar.llm.client import LLMClient
from deepscholar.search.base import SearchResult
from deepscholar.systems.base import Query, SystemContext, make_system
from deepscholar.systems.deepscholar_base import cited_numbers

pytestmark = pytest.mark.slow  # the LLM systems end to end against an HTTP stub

MODEL = "openai/stub-model"
CUTOFF = datetime(2025, 1, 15, tzinfo=UTC)
QUERY = Query(release_id="2025-01", arxiv_id="2501.09999", title="Citation-Aware Retrieval-Augmented Writing",
              abstract="We write related-work sections with retrieval-augmented LLMs that cite what they read.",
              cutoff=CUTOFF)


def paper(n: int) -> SearchResult:
    topic = "retrieval-augmented citation" if n % 2 else "sourdough cooking"
    return SearchResult(arxiv_id=f"2301.{n:05d}", title=f"Paper {n:02d} on {topic}",
                        abstract=f"Abstract of paper {n} about {topic}.  It has  {{braces}} and\nnewlines.",
                        published=datetime(2023, 1, n, tzinfo=UTC), url=f"http://arxiv.org/abs/2301.{n:05d}v1")


PAPERS = {n: paper(n) for n in range(1, 21)}
LEAK = SearchResult(arxiv_id="2502.00001", title="Paper from after the cutoff on retrieval-augmented citation",
                    abstract="Too new.", published=datetime(2025, 2, 1, tzinfo=UTC))
# query -> papers returned, best first
INDEX = {
    "rag": [PAPERS[n] for n in range(1, 9)] + [LEAK],
    "citations": [PAPERS[n] for n in range(6, 14)],
    "agents": [PAPERS[n] for n in range(12, 17)],
    "benchmarks": [PAPERS[n] for n in range(17, 20)],
}


class MemorySearch:
    """A deterministic SearchTool: a fixed answer per query, cut at k, enforcing the cutoff like the real ones."""

    name = "memory"

    def __init__(self, cutoff: datetime) -> None:
        self.cutoff = cutoff
        self.calls: list[tuple[str, int]] = []

    def search(self, text: str, k: int = 10) -> list[SearchResult]:
        self.calls.append((text, k))
        hits = [r for r in INDEX.get(text, []) if r.published is None or r.published < self.cutoff]
        return hits[:k]


@pytest.fixture
def stub():
    with OpenAIStub() as server:
        yield server
    server.raise_errors()


def make(engine, stub: OpenAIStub, kind: str, **config):
    def llm(model, **kw):
        return LLMClient(engine, model, api_key="test", backoff_base=0.01, **kw)

    return make_system(kind, kind, {"model": MODEL, "api_base": stub.url, **config},
                       SystemContext(engine=engine, llm=llm))


def resolved(report) -> bool:
    numbers = cited_numbers(report.text)
    return bool(numbers) and all(1 <= n <= len(report.sources) for n in numbers) and all(
        s.idx == i for i, s in enumerate(report.sources, start=1))


# --- deepscholar_base ------------------------------------------------------------------------------

STAGE_MARKERS = {  # a phrase only that stage's prompt contains
    "queries": "search queries for an academic search engine",
    "filter": "Search results (title and abstract of each)",
    "rank": "Candidate papers (title and abstract of each)",
    "aggregate": "Sources you may cite",
}
_LISTED_RE = re.compile(r"^\[(\d+)\] Title: (.+?)(?: \(\d{4}-\d\d-\d\d\))?$", re.MULTILINE)


def stage_of(body: dict) -> str:
    prompt = first_user_text(body)
    stages = [stage for stage, marker in STAGE_MARKERS.items() if marker in prompt]
    assert len(stages) == 1, prompt[:300]
    return stages[0]


def listed(prompt: str) -> list[tuple[int, str]]:
    return [(int(n), title) for n, title in _LISTED_RE.findall(prompt)]


def base_brain(body: dict) -> str:
    """A cooperative model: first-round and later-round queries, keep-the-on-topic filter, reverse ranking."""
    prompt = first_user_text(body)
    stage = stage_of(body)
    if stage == "queries":
        return '["rag", "citations"]' if "(none: this is the first round)" in prompt else (
            '```json\n["agents", "benchmarks"]\n```')
    if stage == "filter":
        return json.dumps([n for n, title in listed(prompt) if "citation" in title])
    if stage == "rank":
        k = int(re.search(r"Return the (\d+) most important", prompt).group(1))
        return json.dumps([n for n, _ in reversed(listed(prompt))][:k])
    n = len(listed(prompt))
    return ("## Related Work\n\nRetrieval-augmented citation has been studied widely [1][2]. "
            f"Later work refined it [3, 4], and the most recent one [{n}] closes the gap.")


def per_stage(stub: OpenAIStub) -> dict[str, int]:
    counts = dict.fromkeys(STAGE_MARKERS, 0)
    for body in stub.bodies:
        counts[stage_of(body)] += 1
    return counts


def test_base_pipeline_makes_the_designed_calls_and_cites_what_it_showed(engine, stub):
    stub.default = base_brain
    search = MemorySearch(CUTOFF)
    report = make(engine, stub, "deepscholar_base", search_K=8, K=5).generate(QUERY, search)

    # Round 1: "rag" 8 (the leak is cut by the tool) + "citations" 8, 3 overlapping -> 13 new -> 2 filter calls.
    # Round 2: "agents" P12-P16 + "benchmarks" P17-P19, P12/P13 already seen -> 6 new -> 1 filter call.
    assert search.calls == [("rag", 8), ("citations", 8), ("agents", 8), ("benchmarks", 8)]
    expected = {"queries": 2, "filter": math.ceil(13 / 10) + math.ceil(6 / 10), "rank": 1, "aggregate": 1}
    assert per_stage(stub) == expected and stub.requests == 7
    assert report.trace["calls"] == {**expected, "total": 7}
    assert [r["queries"] for r in report.trace["rounds"]] == [["rag", "citations"], ["agents", "benchmarks"]]
    assert [(r["new_candidates"], r["filter_batches"], r["kept"]) for r in report.trace["rounds"]] == [
        (13, 2, 7), (6, 1, 3)]
    assert report.trace["counts"] == {"search_results": 24, "candidates": 19, "kept_by_filter": 10,
                                      "ranked": 5, "cited": 5}
    assert report.trace["prompts"]["aggregate"] == "deepscholar_base_aggregate_v1"

    # Filter batches hold at most 10 candidates; round 2's query writer read round 1's record.
    filters = [first_user_text(b) for b in stub.bodies if stage_of(b) == "filter"]
    assert sorted(len(listed(p)) for p in filters) == [3, 6, 10]
    round2 = [first_user_text(b) for b in stub.bodies if stage_of(b) == "queries"][1]
    assert 'Round 1 searched "rag"; "citations" and found 13 new papers; 7 were relevant' in round2
    assert "- Paper 13 on retrieval-augmented citation" in round2

    # The ranking's top 5 (the 10 kept papers, reversed) are the sources, in ranked order.
    assert [s.arxiv_id for s in report.sources] == [f"2301.{n:05d}" for n in (19, 17, 15, 13, 11)]
    assert resolved(report) and sorted(set(cited_numbers(report.text))) == [1, 2, 3, 4, 5]
    aggregate = next(first_user_text(b) for b in stub.bodies if stage_of(b) == "aggregate")
    for s in report.sources:
        assert s.snippet == f"Abstract of paper {int(s.arxiv_id[-2:])} about retrieval-augmented citation. " \
                            "It has {braces} and newlines."
        assert f"[{s.idx}] Title: {s.title} ({s.published.date()})\nAbstract: {s.snippet}" in aggregate
        assert s.url == f"http://arxiv.org/abs/{s.arxiv_id}v1" and s.published < CUTOFF
    assert report.text.startswith("## Related Work")


def test_base_retries_a_429_and_reasks_a_garbage_answer(engine, stub):
    stub.default = base_brain
    stub.script = [429, "Sure! I would search for rag and citations."]  # the first call: round 1's queries
    report = make(engine, stub, "deepscholar_base", search_K=8, K=5).generate(QUERY, MemorySearch(CUTOFF))

    assert stub.requests == 7 + 2  # one retried request, one re-ask
    assert report.trace["calls"]["queries"] == 3  # the 429 is a retry inside one call; the re-ask is a call
    reask = stub.bodies[2]["messages"]
    assert [m["role"] for m in reask] == ["user", "assistant", "user"]
    assert "not valid JSON" in reask[2]["content"]
    assert resolved(report) and len(report.sources) == 5


def test_base_rerun_is_served_from_the_llm_calls_cache(engine, stub):
    stub.default = base_brain
    first = make(engine, stub, "deepscholar_base", search_K=8, K=5).generate(QUERY, MemorySearch(CUTOFF))
    served = stub.requests
    again = make(engine, stub, "deepscholar_base", search_K=8, K=5).generate(QUERY, MemorySearch(CUTOFF))
    assert stub.requests == served == 7  # the re-run made no request
    assert (again.text, again.sources, again.trace) == (first.text, first.sources, first.trace)


def test_base_fails_with_the_reason_when_an_answer_stays_unparseable(engine, stub):
    def brain(body):
        return "I think 3 and 1 matter most." if stage_of(body) == "rank" else base_brain(body)

    stub.default = brain
    with pytest.raises(SystemFailure, match=r"rank step: unparseable after 3 answers: not valid JSON"):
        make(engine, stub, "deepscholar_base", search_K=8, K=5).generate(QUERY, MemorySearch(CUTOFF))
    assert per_stage(stub)["rank"] == 3 and per_stage(stub)["aggregate"] == 0


def test_base_rejects_a_section_citing_a_source_it_does_not_have(engine, stub):
    answers = iter(["## Related Work\n\nAs shown in [7], it works [1].",
                    "## Related Work\n\nIt works [1][2]."])

    def brain(body):
        return next(answers) if stage_of(body) == "aggregate" else base_brain(body)

    stub.default = brain
    report = make(engine, stub, "deepscholar_base", search_K=8, K=5, N=1).generate(QUERY, MemorySearch(CUTOFF))
    assert report.text == "## Related Work\n\nIt works [1][2]." and report.trace["calls"]["aggregate"] == 2
    assert "cites [7], but the source numbers run from 1 to 5" in stub.bodies[-1]["messages"][-1]["content"]


def test_base_with_nothing_relevant_is_a_system_failure(engine, stub):
    stub.default = lambda body: "[]" if stage_of(body) == "filter" else base_brain(body)
    with pytest.raises(SystemFailure, match="the relevance filter kept none of 19 candidates"):
        make(engine, stub, "deepscholar_base", search_K=8, K=5).generate(QUERY, MemorySearch(CUTOFF))
    assert per_stage(stub) == {"queries": 2, "filter": 3, "rank": 0, "aggregate": 0}


def test_base_config_is_checked_when_the_system_is_made(engine, stub):
    with pytest.raises(ValueError, match="'K' must be a positive integer"):
        make(engine, stub, "deepscholar_base", K=0)


# --- search_agent ----------------------------------------------------------------------------------

FINAL = "## Related Work\n\nRAG grounds generation [1], and citation work extends it [9][13]."


def test_agent_numbers_sources_by_first_sight_and_answers_malformed_calls(engine, stub):
    stub.script = [
        tool_calls_message(tool_call("search", {"query": "rag"})),
        tool_calls_message(tool_call("search", {"query": "  citations "}), tool_call("search", '{"query": "x"')),
        FINAL,
    ]
    search = MemorySearch(CUTOFF)
    report = make(engine, stub, "search_agent").generate(QUERY, search)

    assert stub.requests == 3 and search.calls == [("rag", 10), ("citations", 10)]
    assert report.text == FINAL and resolved(report)
    # P01-P08 as 1-8 (the leak never reaches the agent), then P09-P13 as 9-13; P06-P08 keep 6-8.
    assert [s.arxiv_id for s in report.sources] == [f"2301.{n:05d}" for n in range(1, 14)]
    assert report.sources[8].snippet == "Abstract of paper 9 about retrieval-augmented citation. " \
                                        "It has {braces} and newlines."
    third = stub.bodies[2]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "tool", "tool"]
    second_results = third[4]["content"]
    assert second_results.startswith('Results for "citations":')
    assert "[6] Paper 06 on sourdough cooking (2023-01-06)" in second_results
    assert f"[9] Paper 09 on retrieval-augmented citation (2023-01-09)\n{report.sources[8].snippet}" in second_results
    assert third[5]["content"].startswith("error: the arguments are not valid JSON")
    assert third[5]["tool_call_id"] == third[3]["tool_calls"][1]["id"]
    assert all(b["tool_choice"] == "auto" and b["tools"][0]["function"]["name"] == "search" for b in stub.bodies)

    assert report.trace["counts"] == {"steps": 3, "searches": 2, "malformed": 1, "sources": 13, "cited": 3}
    assert report.trace["calls"] == {"step": 3, "final": 0, "total": 3} and not report.trace["forced_final"]
    assert [s.get("query") for s in report.trace["steps"]] == ["rag", "citations", None]


def test_agent_step_cap_forces_a_final_answer_without_tools(engine, stub):
    calls = iter([
        [tool_call("browse", {"url": "http://example.org"})],  # unknown tool: a step, answered with an error
        [tool_call("search", {"query": "rag"})],
        [tool_call("search", {"query": "citations"}), tool_call("search", {"query": "agents"})],  # over the cap
    ])

    def brain(body):
        if body.get("tool_choice") == "none":
            return "## Related Work\n\nForced to write, it cites [2] and [9]."
        return tool_calls_message(*next(calls, [tool_call("search", {"query": "benchmarks"})]))

    stub.default = brain
    search = MemorySearch(CUTOFF)
    report = make(engine, stub, "search_agent", max_steps=3).generate(QUERY, search)

    assert stub.requests == 4 and search.calls == [("rag", 10), ("citations", 10)]  # "agents" never ran
    final = stub.bodies[-1]
    assert final["tool_choice"] == "none" and final["tools"][0]["function"]["name"] == "search"
    assert final["messages"][-1] == {"role": "user", "content": (
        "You have used all your searches. Write the related-work section now from the results you have seen,\n"
        "citing them as [n] with their result numbers, and answer with the section only.\n")}
    tool_messages = [m["content"] for m in final["messages"] if m["role"] == "tool"]
    assert tool_messages[0] == "error: unknown tool 'browse'; the only tool is search(query)"
    assert tool_messages[-1] == "error: the budget of 3 searches is spent; this call was not run"
    assert report.trace["forced_final"] and report.trace["calls"] == {"step": 3, "final": 1, "total": 4}
    assert report.trace["counts"]["steps"] == 3 and report.trace["counts"]["malformed"] == 1
    assert resolved(report) and len(report.sources) == 13


def test_agent_reasks_a_final_answer_citing_a_number_it_never_saw(engine, stub):
    stub.script = [tool_calls_message(tool_call("search", {"query": "benchmarks"})),
                   "## Related Work\n\nSee [4].", "## Related Work\n\nSee [3] and [1]."]
    report = make(engine, stub, "search_agent").generate(QUERY, MemorySearch(CUTOFF))
    assert report.text == "## Related Work\n\nSee [3] and [1]." and len(report.sources) == 3
    assert report.trace["calls"] == {"step": 2, "final": 1, "total": 3}
    correction = stub.bodies[-1]
    assert correction["tool_choice"] == "none"
    assert "cites [4], but the source numbers run from 1 to 3" in correction["messages"][-1]["content"]


def test_agent_final_answer_that_stays_unusable_is_a_system_failure(engine, stub):
    stub.script = [tool_calls_message(tool_call("search", {"query": "agents"}))]
    stub.default = lambda body: "## Related Work\n\nNothing cited here."
    with pytest.raises(SystemFailure, match="final answer: unparseable after 3 answers: the section cites no source"):
        make(engine, stub, "search_agent").generate(QUERY, MemorySearch(CUTOFF))


def test_agent_rerun_is_served_from_the_llm_calls_cache(engine, stub):
    stub.script = [tool_calls_message(tool_call("search", {"query": "rag"})),
                   tool_calls_message(tool_call("search", {"query": "citations"})), FINAL]
    first = make(engine, stub, "search_agent").generate(QUERY, MemorySearch(CUTOFF))
    stub.default = lambda body: 500  # any request now would fail the run
    again = make(engine, stub, "search_agent").generate(QUERY, MemorySearch(CUTOFF))
    assert stub.requests == 3
    assert (again.text, again.sources, again.trace) == (first.text, first.sources, first.trace)
