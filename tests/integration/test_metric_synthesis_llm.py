"""Organization, nugget coverage and relevance rate on the LLM path, over real HTTP to a scripted server.

Each test counts the requests that reach the server against the METRICS.md floor (organization 2,
nuggets ceil(N/10), relevance |S|) and checks that a second identical run is answered by llm_calls alone.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.base import NuggetInfo, QueryInfo, ReportContext, SourceDoc
from deepscholar.llm.client import LLMClient
from deepscholar.text.sentences import split_report_sentences as split_sentences

pytestmark = pytest.mark.slow  # the real LLMClient (litellm import, seconds per process) against an HTTP stub

EXEMPLAR = ("Retrieval-augmented generation conditions a generator on retrieved passages [@lewis2020]. "
            "Dense retrievers replaced sparse ones [@karpukhin2020; @lewis2020].\n")
REPORT_MARK = "REPORT-SECTION"
REPORT_TEXT = (f"{REPORT_MARK}: retrieval-augmented models ground generation in passages [1]. "
               "Dense retrieval with dual encoders beats BM25 [2]. RAG is popular [1][3].\n\n"
               "## References\n[1] Lewis 2020. RAG. arXiv:2005.11401\n"
               "[2] Karpukhin 2020. DPR. arXiv:2004.04906\n")
NUGGETS = tuple(NuggetInfo(i, f"nugget fact {i:02d}", "vital" if i < 5 else "okay") for i in range(23))
SOURCES = {
    1: SourceDoc(1, "2005.11401", "Retrieval-Augmented Generation", "snippet A", abstract="RAG abstract."),
    2: SourceDoc(2, "2004.04906", "Dense Passage Retrieval", "DPR snippet"),
    3: SourceDoc(3, "2005.11401", "RAG (same paper, another number)", "snippet B", abstract="RAG abstract."),
    4: SourceDoc(4, "1706.03762", "Attention Is All You Need", "never cited"),
}
GRADE_OF_TITLE = {"Retrieval-Augmented Generation": 2, "Dense Passage Retrieval": 1}


def make_report(text: str = REPORT_TEXT, sources=None, *, report_id: int = 1,
                system_id: str = "sys-a") -> ReportContext:
    query = QueryInfo(release_id="2025-01", arxiv_id="2501.00001", title="Citing with retrieval",
                      abstract="We write cited related-work sections with retrieval.", published=None,
                      exemplar_text=EXEMPLAR, nuggets=NUGGETS)
    return ReportContext(report_id=report_id, release_id="2025-01", system_id=system_id, system_kind="llm",
                         arxiv_id=query.arxiv_id, text=text, query=query,
                         sources=SOURCES if sources is None else sources,
                         sentences=tuple(split_sentences(text)))


class ScriptedJudge:
    """Answers by reading the prompt, as a judge would; tests switch parts of it to garbage."""

    def __init__(self, stub: OpenAIStub) -> None:
        self.stub = stub
        self.organization = "report"  # who wins: "report", "exemplar", or "A" (always the first shown)
        self.garbage_when: str | None = None  # answer prose to prompts containing this text
        stub.default = self.answer

    def answer(self, body: dict) -> str:
        prompt = first_user_text(body)
        if self.garbage_when and self.garbage_when in prompt:
            return "I think it is fine overall."
        if prompt.startswith("You are comparing two related-work sections"):
            a = prompt.split("Section A:")[1].split("Section B:")[0]
            report_at = "A" if REPORT_MARK in a else "B"
            decision = {"report": report_at, "exemplar": "B" if report_at == "A" else "A", "A": "A"}[
                self.organization]
            return json.dumps({"decision": decision, "explanation": "scripted"})
        if prompt.startswith("You are checking which facts"):
            numbers = [int(n) for n in re.findall(r"nugget fact (\d+)", prompt)]
            # support for multiples of 3, partial for 1 mod 3, else not.
            return json.dumps([("support", "partial_support", "not_support")[n % 3] for n in numbers])
        if prompt.startswith("You are grading whether a paper"):
            title = re.search(r"Title: (.*)\nText:", prompt).group(1)
            return json.dumps({"grade": GRADE_OF_TITLE[title], "explanation": "scripted"})
        raise AssertionError(f"unexpected prompt: {prompt[:120]}")


@pytest.fixture
def judge():
    with OpenAIStub(model_suffix="") as stub:
        yield ScriptedJudge(stub)
    stub.raise_errors()


def client_for(engine, judge: ScriptedJudge) -> LLMClient:
    return LLMClient(engine, "openai/judge", api_base=judge.stub.url, api_key="test", concurrency=4,
                     max_reasks=2, backoff_base=0.01)


def run(metric_name: str, client: LLMClient, report: ReportContext):
    """What the runner does for one report: every item through client.map, then score()."""
    metric = get_metric(metric_name)
    items = metric.items(report)
    judgments = client.map(lambda item: metric.judge_llm(client, report, item), items)
    return judgments, {s.variant: s for s in metric.score(report, judgments)}


def purposes(engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.text("SELECT DISTINCT purpose FROM deepscholar.llm_calls")).scalars())


# --- organization ---------------------------------------------------------------------------------

def test_organization_two_requests_and_a_free_rerun(engine, judge):
    judgments, scores = run("organization", client_for(engine, judge), make_report())
    assert scores["score"].value == 1.0
    assert [j.label for j in judgments] == [{"decision": "A", "winner": "report"},
                                            {"decision": "B", "winner": "report"}]
    assert judge.stub.requests == 2  # METRICS.md floor: 2
    assert purposes(engine) == {"metric.organization"}
    prompt = first_user_text(judge.stub.bodies[0])
    assert "[@" not in prompt and "## References" not in prompt  # both sections in one shape

    again, rescored = run("organization", client_for(engine, judge), make_report())
    assert judge.stub.requests == 2 and again == judgments and rescored == scores


def test_organization_position_bias_gives_half(engine, judge):
    judge.organization = "A"
    _, scores = run("organization", client_for(engine, judge), make_report())
    assert scores["score"].value == 0.5 and judge.stub.requests == 2


def test_organization_garbage_is_unscored_after_reasks(engine, judge):
    judge.garbage_when = f"Section B:\n<<<\n{REPORT_MARK}"  # the report-second order only
    judgments, scores = run("organization", client_for(engine, judge), make_report())
    assert judgments[0].scored
    bad = judgments[1]
    assert bad.label is None and bad.calls == 3 and "not valid JSON" in bad.unscored_reason
    assert scores["score"].value is None and "order:report_second" in scores["score"].unscored_reason
    assert judge.stub.requests == 1 + 3


# --- nugget coverage ------------------------------------------------------------------------------

def test_nuggets_one_request_per_ten_and_a_free_rerun(engine, judge):
    judgments, scores = run("nugget_coverage", client_for(engine, judge), make_report())
    assert judge.stub.requests == math.ceil(len(NUGGETS) / 10) == 3
    assert [j.key for j in judgments] == ["nuggets:0-9", "nuggets:10-19", "nuggets:20-22"]
    support = sum(i % 3 == 0 for i in range(23))  # 8
    partial = sum(i % 3 == 1 for i in range(23))  # 8
    assert scores["strict_all"].value == pytest.approx(support / 23)
    assert scores["all"].value == pytest.approx((support + 0.5 * partial) / 23)
    assert scores["strict_vital"].value == pytest.approx(2 / 5)  # vital 0..4: support 0, 3; partial 1, 4
    assert scores["vital"].value == pytest.approx((2 + 0.5 * 2) / 5)
    assert purposes(engine) == {"metric.nugget_coverage"}

    _, rescored = run("nugget_coverage", client_for(engine, judge), make_report())
    assert judge.stub.requests == 3 and rescored == scores


def test_nuggets_garbage_batch_leaves_the_report_unscored(engine, judge):
    judge.garbage_when = "nugget fact 20"
    judgments, scores = run("nugget_coverage", client_for(engine, judge), make_report())
    assert [j.scored for j in judgments] == [True, True, False]
    assert judgments[2].calls == 3 and "not valid JSON" in judgments[2].unscored_reason
    assert all(s.value is None and "nuggets:20-22" in s.unscored_reason for s in scores.values())
    assert judge.stub.requests == 2 + 3


# --- relevance rate -------------------------------------------------------------------------------

def test_relevance_one_request_per_distinct_source_shared_across_reports(engine, judge):
    report = make_report()
    judgments, scores = run("relevance_rate", client_for(engine, judge), report)
    # S = {2005.11401 (cited as [1] and [3]), 2004.04906}; [4] is stored but never cited.
    assert [j.key for j in judgments] == ["src:2005.11401", "src:2004.04906"]
    assert judge.stub.requests == len(report.cited_arxiv_ids) == 2
    assert scores["score"].value == pytest.approx((2 + 1) / (2 * 2))
    assert purposes(engine) == {"metric.relevance_rate"}

    # Another system's report citing the same papers under other numbers, with other snippets: no request.
    other = make_report("Different words [2]. Dense retrieval [1].\n", report_id=2, system_id="sys-b",
                        sources={2: SourceDoc(2, "2005.11401", "Retrieval-Augmented Generation",
                                              "other snippet", abstract="RAG abstract."),
                                 1: SourceDoc(1, "2004.04906", "Dense Passage Retrieval", "DPR snippet")})
    _, other_scores = run("relevance_rate", client_for(engine, judge), other)
    assert judge.stub.requests == 2 and other_scores["score"].value == pytest.approx(0.75)

    _, rescored = run("relevance_rate", client_for(engine, judge), report)
    assert judge.stub.requests == 2 and rescored == scores


def test_relevance_garbage_leaves_the_report_unscored(engine, judge):
    judge.garbage_when = "Title: Dense Passage Retrieval"
    judgments, scores = run("relevance_rate", client_for(engine, judge), make_report())
    assert judgments[0].scored and not judgments[1].scored and judgments[1].calls == 3
    assert scores["score"].value is None and "src:2004.04906" in scores["score"].unscored_reason
    assert judge.stub.requests == 1 + 3


def test_relevance_without_cited_arxiv_sources_is_zero_with_no_request(engine, judge):
    _, scores = run("relevance_rate", client_for(engine, judge), make_report("No citations here.\n"))
    assert scores["score"].value == 0.0 and scores["score"].unscored_reason is None
    assert judge.stub.requests == 0
