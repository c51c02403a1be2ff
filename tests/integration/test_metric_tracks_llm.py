"""The FACT track and ReportBench's cited statement match through the real LLMClient over HTTP against
OpenAIStub.

The stub answers like a judge reading the prompt: CAPITALISED words stand for claims. FACT: a statement is
supported when it shares one with the source. Cited statement match: the source sentence sharing one is
quoted and matches; none is NOT_FOUND.
"""

from __future__ import annotations

import json
import re

import pytest
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar.evaluation.metrics.base import QueryInfo, ReportContext, SourceDoc
from deepscholar.evaluation.metrics.fact.citation_accuracy import METRIC as ACCURACY
from deepscholar.evaluation.metrics.fact.effective_citations import METRIC as EFFECTIVE
from deepscholar.evaluation.metrics.reportbench.cited_statement_match import METRIC as STATEMENT_MATCH
from deepscholar.llm.client import LLMClient, track_usage
from deepscholar.text.sentences import Sentence

pytestmark = pytest.mark.slow  # the real LLMClient (litellm import, seconds per process) against an HTTP stub

QUERY = QueryInfo(release_id="2025-01", arxiv_id="2501.00001", title="A study", abstract="We study it.",
                  published=None, exemplar_text="")


def make_report(sentences, sources, *, report_id=1) -> ReportContext:
    sents = tuple(Sentence(i, text, list(cites)) for i, (text, cites) in enumerate(sentences))
    docs = {n: SourceDoc(idx=n, arxiv_id=None, title=None, text=text) for n, text in sources.items()}
    return ReportContext(report_id=report_id, release_id="2025-01", system_id="sys", system_kind="deepscholar_base",
                         arxiv_id=QUERY.arxiv_id, text=" ".join(t for t, _ in sentences), query=QUERY,
                         sources=docs, sentences=sents)


def _claims(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z]{3,}\b", text))


def judge_answer(body: dict) -> str:
    prompt = first_user_text(body)
    first, second = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)
    if "numbered, one per line" in prompt:  # FACT: the source, then the numbered statements
        statements = [line.split(". ", 1)[1] for line in second.split("\n")]
        labels = ["supported" if _claims(s) & _claims(first) else "unsupported" for s in statements]
        return json.dumps(["WRONG"] if "BROKEN" in first else labels)
    quote = next((s.strip() for s in second.split(".") if _claims(s) & _claims(first)), None)  # the statement, the source
    if quote is None:
        return json.dumps({"quote": "NOT_FOUND", "match": False, "reason": "absent"})
    return json.dumps({"quote": quote, "match": True, "reason": "same claim"})


@pytest.fixture
def stub():
    with OpenAIStub(model_suffix="") as server:
        server.default = judge_answer
        yield server
    server.raise_errors()


def client_for(engine, stub, concurrency=8) -> LLMClient:
    return LLMClient(engine, "openai/judge", api_base=stub.url, api_key="test", concurrency=concurrency,
                     max_reasks=1, backoff_base=0.01)


REPORT = [("ALPHA is fast [1].", [1]), ("BETA scales [1][2].", [1, 2]), ("GAMMA came later [3][4].", [3, 4]),
          ("ALPHA is fast [1].", [1]), ("No citation here.", [])]
SOURCES = {1: "The ALPHA and BETA paper.", 2: "An unrelated paper.", 3: "GAMMA paper.", 4: ""}


def test_both_fact_metrics_judged_side_by_side_cost_one_request_per_cited_source(engine, stub):
    """What a judge task does with the two FACT units: their items through one client at once. The second
    metric's identical questions wait for the first's requests in flight (or find them answered)."""
    stub.delay = 0.2
    report = make_report(REPORT, SOURCES)
    client = client_for(engine, stub)
    work = [(metric, item) for item in ACCURACY.items(report) for metric in (ACCURACY, EFFECTIVE)]
    with track_usage() as usage:
        judged = client.map(lambda pair: pair[0].judge_llm(client, report, pair[1]), work)
    assert stub.requests == 3  # sources [1], [2], [3]; [4] has no text: unknown, no call
    assert (usage.calls, usage.requests) == (6, 3)  # the other three answered without a request
    accuracy = [j for (m, _), j in zip(work, judged, strict=True) if m is ACCURACY]
    effective = [j for (m, _), j in zip(work, judged, strict=True) if m is EFFECTIVE]
    assert [(j.key, j.label) for j in accuracy] == [(j.key, j.label) for j in effective]
    assert [(j.key, [x["label"] for x in j.label], j.calls) for j in accuracy] == [
        ("c1", ["supported", "supported"], 1), ("c2", ["unsupported"], 1), ("c3", ["supported"], 1),
        ("c4", ["unknown"], 0)]
    (acc,) = ACCURACY.score(report, accuracy)
    (eff,) = EFFECTIVE.score(report, effective)
    assert acc.value == pytest.approx(3 / 4) and eff.value == 3.0  # unknown GAMMA-[4] left out, not counted
    assert acc.details["unknown"] == 1 and acc.details["n_pairs"] == 5

    # Judged again by a new client (another task, another day): everything from llm_calls.
    again = client_for(engine, stub)
    rerun = again.map(lambda item: EFFECTIVE.judge_llm(again, report, item), EFFECTIVE.items(report))
    assert stub.requests == 3 and [j.label for j in rerun] == [j.label for j in effective]


def test_a_batch_answer_with_a_bad_label_is_re_asked_then_the_report_is_unscored(engine, stub):
    report = make_report([("ALPHA [1].", [1]), ("BETA [2].", [2])], {1: "ALPHA", 2: "BROKEN BETA"})
    client = client_for(engine, stub)
    judgments = client.map(lambda item: ACCURACY.judge_llm(client, report, item), ACCURACY.items(report))
    assert [(j.key, j.scored, j.calls) for j in judgments] == [("c1", True, 1), ("c2", False, 2)]
    assert "must be one of 'supported', 'unsupported'" in judgments[1].unscored_reason
    assert stub.requests == 3
    (score,) = ACCURACY.score(report, judgments)
    assert score.value is None and "1 of 2 items unscored; first: c2" in score.unscored_reason


def test_cited_statement_match_one_request_per_pair_with_text(engine, stub):
    report = make_report(REPORT, SOURCES)
    client = client_for(engine, stub)
    judgments = client.map(lambda item: STATEMENT_MATCH.judge_llm(client, report, item), STATEMENT_MATCH.items(report))
    assert [(j.key, j.label["match"], j.calls) for j in judgments] == [
        ("s0:c1", True, 1), ("s1:c1", True, 1), ("s1:c2", False, 1), ("s2:c3", True, 1), ("s2:c4", False, 0),
        ("s3:c1", True, 1)]
    # s3 repeats s0 word for word: the same request, answered from the cache
    assert stub.requests == 4
    assert judgments[0].label == {"match": True, "quote": "The ALPHA and BETA paper", "quote_in_source": True}
    (score,) = STATEMENT_MATCH.score(report, judgments)
    assert score.value == pytest.approx(4 / 6)
    assert score.details["n_no_text"] == 1 and score.details["n_not_found"] == 2
