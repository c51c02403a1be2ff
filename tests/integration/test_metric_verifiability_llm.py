"""Citation precision and claim coverage through the real LLMClient over HTTP against OpenAIStub.

The stub answers like a judge reading the prompt: CAPITALISED words stand for claims; a source supports
a sentence when they share one (citation precision), and references cover a sentence when they contain
all of its claims (claim coverage).
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar.evaluation.metrics.base import QueryInfo, ReportContext, SourceDoc
from deepscholar.evaluation.metrics.core.citation_precision import METRIC as CITATION_PRECISION
from deepscholar.evaluation.metrics.core.claim_coverage import SWEEP_W_MAX, ClaimCoverage
from deepscholar.llm.client import LLMClient
from deepscholar.text.sentences import Sentence

pytestmark = pytest.mark.slow  # the real LLMClient (litellm import, seconds per process) against an HTTP stub

# The opt-in w = 0..5 sweep: the window search is what these tests look at (monthly runs stop at w = 1).
CLAIM_COVERAGE = ClaimCoverage(w_max=SWEEP_W_MAX)

QUERY = QueryInfo(release_id="2025-01", arxiv_id="2501.00001", title="A QUERYTOPIC study",
                  abstract="We study QUERYTOPIC in depth.", published=None, exemplar_text="")
GARBAGE = "I would say it is supported."


def make_report(sentences, sources, *, report_id=1) -> ReportContext:
    sents = tuple(Sentence(i, text, list(cites)) for i, (text, cites) in enumerate(sentences))
    docs = {n: SourceDoc(idx=n, arxiv_id=None, title=None, text=text) for n, text in sources.items()}
    return ReportContext(report_id=report_id, release_id="2025-01", system_id="sys", system_kind="deepscholar_base",
                         arxiv_id=QUERY.arxiv_id, text=" ".join(t for t, _ in sentences), query=QUERY,
                         sources=docs, sentences=sents)


def _claims(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z]{3,}\b", text))


def judge_answer(body: dict, garbage_when=lambda first, second: False) -> str:
    """The stub's answer, from the first user message (so a re-ask gets the same kind of answer)."""
    prompt = first_user_text(body)
    first, second = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)
    if garbage_when(first, second):
        return GARBAGE
    if "The cited source" in prompt:  # citation precision: sentence, then source
        ok = bool(_claims(first) & _claims(second))
    else:  # claim coverage: references, then sentence
        ok = _claims(second) <= _claims(first)
    return f'{{"supported": {"true" if ok else "false"}, "explanation": "judged by the stub"}}'


@pytest.fixture
def stub():
    with OpenAIStub(model_suffix="") as server:
        server.default = judge_answer
        yield server
    server.raise_errors()


def client_for(engine, stub) -> LLMClient:
    return LLMClient(engine, "openai/judge", api_base=stub.url, api_key="test", concurrency=4, max_reasks=1,
                     backoff_base=0.01)


def judge(metric, client, report):
    """What the runner does for one report: every item through client.map, then score()."""
    judgments = client.map(lambda item: metric.judge_llm(client, report, item), metric.items(report))
    return judgments, {s.variant: s for s in metric.score(report, judgments)}


# --- citation precision ------------------------------------------------------------------------------

CP_REPORT = [
    ("ALPHA and BETA are fast [1][2][4].", [1, 2, 4]),  # 1, 0, 1
    ("GAMMA came later [3][1].", [3, 1]),  # 1, 0
    ("A sentence citing nothing.", []),
]
CP_SOURCES = {1: "ALPHA paper.", 2: "An unrelated paper.", 3: "GAMMA paper.", 4: "BETA paper."}


def test_citation_precision_one_request_per_pair_and_a_rerun_is_free(engine, stub):
    report = make_report(CP_REPORT, CP_SOURCES)
    judgments, scores = judge(CITATION_PRECISION, client_for(engine, stub), report)
    assert [(j.key, j.label, j.calls) for j in judgments] == [
        ("s0:c1", 1, 1), ("s0:c2", 0, 1), ("s0:c4", 1, 1), ("s1:c3", 1, 1), ("s1:c1", 0, 1)]
    assert stub.requests == 5  # = the number of (sentence, citation) pairs
    assert scores["per_pair"].value == pytest.approx(3 / 5)
    assert scores["per_sentence"].value == pytest.approx((2 / 3 + 1 / 2) / 2)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT DISTINCT purpose FROM llm_calls")).scalars().all() == [
            "metric.citation_precision"]

    # The same sentence citing the same source text in another report, under another number: cached.
    other = make_report([("GAMMA came later [7].", [7])], {7: "GAMMA paper."}, report_id=2)
    again, _ = judge(CITATION_PRECISION, client_for(engine, stub), other)
    assert [(j.label, j.calls) for j in again] == [(1, 1)]
    assert stub.requests == 5

    rerun, rescored = judge(CITATION_PRECISION, client_for(engine, stub), report)
    assert stub.requests == 5
    assert rerun == judgments and rescored == scores


def test_citation_precision_garbage_answers_leave_the_report_unscored(engine, stub):
    stub.default = lambda body: judge_answer(body, lambda sentence, source: "GAMMA" in sentence)
    judgments, scores = judge(CITATION_PRECISION, client_for(engine, stub), make_report(CP_REPORT, CP_SOURCES))
    failed = [j for j in judgments if not j.scored]
    assert [(j.key, j.calls) for j in failed] == [("s1:c3", 2), ("s1:c1", 2)]  # answer, re-ask, give up
    assert failed[0].unscored_reason.startswith("unparseable after 2 answers")
    assert stub.requests == 3 + 2 * 2
    for s in scores.values():
        assert s.value is None
        assert s.unscored_reason.startswith("2 of 5 items unscored; first: s1:c3: unparseable after 2 answers")


# --- claim coverage ----------------------------------------------------------------------------------

CC_REPORT = [
    ("QUERYTOPIC is studied here.", []),  # min window 0 (the query abstract)
    ("ALPHA improves retrieval [1].", [1]),  # 0
    ("It extends BETA to new domains.", []),  # 1
    ("BETA was proposed earlier [2].", [2]),  # 0
    ("GAMMA is related.", []),  # 2
    ("EPSILON is claimed without support.", []),  # never; asks w0, w1, w2, w4
    ("DELTA is covered [3].", [3]),  # 0
]
CC_SOURCES = {1: "The ALPHA method.", 2: "BETA was proposed.", 3: "GAMMA and DELTA."}


def test_claim_coverage_early_exit_request_count_and_a_rerun_is_free(engine, stub):
    report = make_report(CC_REPORT, CC_SOURCES)
    judgments, scores = judge(CLAIM_COVERAGE, client_for(engine, stub), report)
    assert [j.label["min_window"] for j in judgments] == [0, 0, 1, 0, 2, None, 0]
    assert [j.label["asked"] for j in judgments] == [[0], [0], [0, 1], [0], [0, 1, 2], [0, 1, 2, 4], [0]]
    assert stub.requests == 13 <= len(CC_REPORT) * (CLAIM_COVERAGE.w_max + 1)
    values = {v: s.value for v, s in scores.items()}
    assert values == pytest.approx({"w0": 4 / 7, "w1": 5 / 7, "w2": 6 / 7, "w3": 6 / 7, "w4": 6 / 7, "w5": 6 / 7})
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT DISTINCT purpose FROM llm_calls")).scalars().all() == [
            "metric.claim_coverage"]

    rerun, rescored = judge(CLAIM_COVERAGE, client_for(engine, stub), report)
    assert stub.requests == 13
    assert rerun == judgments and rescored == scores


def test_claim_coverage_garbage_answer_leaves_the_report_unscored(engine, stub):
    # GAMMA's sentence gets proper answers at w0 and w1, then garbage at w2 (where DELTA's source joins).
    stub.default = lambda body: judge_answer(body, lambda refs, sentence: "GAMMA" in sentence and "DELTA" in refs)
    judgments, scores = judge(CLAIM_COVERAGE, client_for(engine, stub), make_report(CC_REPORT, CC_SOURCES))
    failed = [j for j in judgments if not j.scored]
    assert [(j.key, j.calls) for j in failed] == [("s4", 4)]  # w0, w1, w2 and one re-ask
    assert failed[0].unscored_reason.startswith("window 2: unparseable after 2 answers")
    assert stub.requests == 13 + 1
    for s in scores.values():
        assert s.value is None
        assert s.unscored_reason.startswith("1 of 7 items unscored; first: s4: window 2: unparseable")
