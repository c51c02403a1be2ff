"""ReportBench's uncited claim support without a network or a warehouse: one extraction call lists the
checkable claims among the uncited sentences, each claim is searched for (an in-memory search bound like
the runner binds the real one) and judged supported / contradicted / not_enough_evidence; score =
supported / extracted, unscored when nothing is checkable."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from support.judge_stub import scripted_judge
from support.metric_support import (
    RELEASE_ID,
    ScriptedJudge,
    item_judgment,
    judge_and_score,
    needs_model,
    query_info,
    report_context,
)

from deepscholar.evaluation.metrics import get_metric, registry
from deepscholar.evaluation.metrics.reportbench.uncited_claim_support import (
    EVIDENCE_K,
    METRIC,
    SUPPORT_COSINE,
    EvidenceScope,
    heuristic_claim,
    parse_claims,
    parse_verdict,
)
from deepscholar.llm.client import ParseError
from deepscholar.search.base import SearchResult
from deepscholar.search.local import LocalSearch

CUTOFF = datetime(2025, 1, 10, tzinfo=UTC)
QUERY_ID = "2501.00001"


def paper(arxiv_id: str, title: str, abstract: str = "", published: datetime | None = None) -> SearchResult:
    return SearchResult(arxiv_id, title, abstract, published if published is not None else datetime(2024, 3, 1, tzinfo=UTC))


# The in-memory corpus: a claim finds the papers whose title shares one of its CAPITALISED words.
PAPERS = [
    paper("2401.00010", "ALPHA reaches 90 percent", "ALPHA reaches 90 percent on the benchmark."),
    paper("2401.00011", "On BETA", "BETA was introduced in 2019."),
    paper("2401.00012", "GAMMA revisited", "GAMMA is slower than claimed."),
    paper("2401.00013", "DELTA and ALPHA", "A comparison."),
]


class MemorySearch:
    """A SearchTool over PAPERS (and whatever a test adds), bound to one scope; records what it was asked."""

    name = "memory"

    def __init__(self, scope, papers, log) -> None:
        self.scope, self.cutoff, self.papers, self.log = scope, scope.cutoff, papers, log

    def search(self, text: str, k: int = 10) -> list[SearchResult]:
        self.log.append((self.scope, text, k))
        words = set(re.findall(r"\b[A-Z]{3,}\b", text))
        return [p for p in self.papers if words & set(re.findall(r"\b[A-Z]{3,}\b", p.title))][:k]


@pytest.fixture
def searches():
    """METRIC bound to the in-memory search for the test release, as prepare() binds the real one; the
    list of (scope, text, k) it was asked."""
    log: list = []
    METRIC.bind(RELEASE_ID, lambda scope: MemorySearch(scope, PAPERS, log))
    yield log
    METRIC.unbind(RELEASE_ID)


def make_report(sentences, *, published=CUTOFF, kind="deepscholar_base"):
    query = query_info(arxiv_id=QUERY_ID, published=published)
    return report_context(sentences=sentences, query=query, system_kind=kind)


SENTENCES = [
    ("Retrieval helps generation [1].", [1]),  # 1: cited, never offered
    ("ALPHA reaches 90 percent on the benchmark.", []),  # 2
    ("This field is exciting.", []),  # 3: an opinion
    ("BETA was introduced in 2019.", []),  # 4
    ("GAMMA is faster than every baseline.", []),  # 5
    ("[2].", [2]),  # 6: markers alone
]


def fenced(prompt: str, n: int) -> str:
    return re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[n]


def judge_answers(claims: list[dict], verdicts: dict[str, dict]):
    """An extraction answering `claims`; a verdict by the claim's first CAPITALISED word."""
    def answer(prompt: str) -> str:
        if "Its sentences that cite nothing" in prompt:
            return json.dumps(claims)
        word = re.findall(r"\b[A-Z]{3,}\b", fenced(prompt, 0))[0]
        return json.dumps(verdicts[word])
    return answer


SUPPORTED = {"verdict": "supported", "papers": [1], "reason": "paper 1 says so"}
CONTRADICTED = {"verdict": "contradicted", "papers": [1], "reason": "paper 1 says slower"}
NOT_ENOUGH = {"verdict": "not_enough_evidence", "papers": [], "reason": "not said"}
THREE_CLAIMS = [{"sentence": 2, "claim": "ALPHA reaches 90 percent."}, {"sentence": 4, "claim": "BETA dates from 2019."},
                {"sentence": 5, "claim": "GAMMA is faster than every baseline."}]


def test_a_reportbench_faithfulness_metric_beside_cited_statement_match():
    assert get_metric("uncited_claim_support") is METRIC
    assert registry.dimension_declarations()[METRIC.dimension].family == "reportbench"
    assert (METRIC.dimension, METRIC.position, METRIC.headline, METRIC.variants) == ("faithfulness", 2, "score",
                                                                                    ("score",))
    assert METRIC.version == "d1+uncited_claim_extract_v1+uncited_claim_verdict_v1"
    assert registry.metric_names("reportbench")[-2:] == ("cited_statement_match", "uncited_claim_support")
    assert "uncited_claim_support" not in registry.judged_metric_names()
    assert "uncited_claim_support" in registry.judged_metric_names(["reportbench"])
    assert METRIC.prompt.fenced and METRIC.verdict_prompt.fenced


def test_score_is_supported_over_extracted_with_every_claim_in_the_label(searches):
    report = make_report(SENTENCES)
    client = ScriptedJudge(judge_answers(THREE_CLAIMS, {"ALPHA": SUPPORTED, "BETA": SUPPORTED, "GAMMA": CONTRADICTED}))
    (judgment,), scores = judge_and_score(METRIC, report, client)
    assert scores["score"].value == pytest.approx(2 / 3)
    assert scores["score"].details == {"n_uncited_sentences": 4, "n_claims": 3, "n_supported": 2, "n_contradicted": 1,
                                       "n_not_enough_evidence": 0, "n_without_evidence": 0}
    assert judgment.key == "uncited" and judgment.calls == 4 and len(client.asked) == 4
    # Only the uncited sentences are offered, numbered by their place in the report.
    offered = fenced(client.prompts[0], 2)
    assert offered.splitlines() == ["2. ALPHA reaches 90 percent on the benchmark.", "3. This field is exciting.",
                                    "4. BETA was introduced in 2019.", "5. GAMMA is faster than every baseline."]
    assert fenced(client.prompts[0], 0) == "Q\n\nA"  # the query paper's title and abstract
    assert "Retrieval helps generation [1]." in fenced(client.prompts[0], 1)  # the whole report, for context
    assert client.purposes == ["metric.uncited_claim_support.extract"] + ["metric.uncited_claim_support.verdict"] * 3
    # Each verdict question holds the claim and its evidence, titles and abstracts, numbered.
    assert fenced(client.prompts[1], 0) == "ALPHA reaches 90 percent."
    assert fenced(client.prompts[1], 1) == ("1. ALPHA reaches 90 percent\nALPHA reaches 90 percent on the benchmark."
                                            "\n\n2. DELTA and ALPHA\nA comparison.")
    assert [(s.arxiv_id, s.cutoff, text, k) for s, text, k in searches] == [
        (QUERY_ID, CUTOFF, c["claim"], EVIDENCE_K) for c in THREE_CLAIMS]
    label = judgment.label
    assert json.loads(json.dumps(label)) == label  # stored as JSON
    assert label["n_uncited_sentences"] == 4 and label["search"]["backend"] == "local"
    assert label["claims"][0] == {
        "sentence": 2, "text": "ALPHA reaches 90 percent on the benchmark.", "claim": "ALPHA reaches 90 percent.",
        "evidence": [{"arxiv_id": "2401.00010", "title": "ALPHA reaches 90 percent", "published": "2024-03-01"},
                     {"arxiv_id": "2401.00013", "title": "DELTA and ALPHA", "published": "2024-03-01"}],
        "verdict": "supported", "papers": ["2401.00010"], "reason": "paper 1 says so"}
    assert [(c["sentence"], c["verdict"]) for c in label["claims"]] == [
        (2, "supported"), (4, "supported"), (5, "contradicted")]
    assert judgment.explanation == ("3 checkable claims in 4 uncited sentences: 2 supported, 1 contradicted, "
                                    "0 not enough evidence")


def test_a_claim_the_search_finds_nothing_for_is_not_enough_evidence_without_a_call(searches):
    report = make_report(SENTENCES)
    claims = [*THREE_CLAIMS[:2], {"sentence": 3, "claim": "nobody knows this field"}]
    client = ScriptedJudge(judge_answers(claims, {"ALPHA": NOT_ENOUGH, "BETA": SUPPORTED}))
    (judgment,), scores = judge_and_score(METRIC, report, client)
    assert judgment.calls == 3 and scores["score"].value == pytest.approx(1 / 3)
    assert [c["sentence"] for c in judgment.label["claims"]] == [2, 3, 4]  # in the report's order
    unfound = judgment.label["claims"][1]
    assert (unfound["evidence"], unfound["verdict"], unfound["papers"]) == ([], "not_enough_evidence", [])
    assert "no call" in unfound["reason"]
    assert scores["score"].details["n_without_evidence"] == 1 and scores["score"].details["n_not_enough_evidence"] == 2


def test_nothing_extracted_is_unscored_never_one_or_zero(searches):
    report = make_report(SENTENCES)
    (judgment,), scores = judge_and_score(METRIC, report, ScriptedJudge("[]"))
    assert judgment.scored and judgment.calls == 1 and judgment.label["claims"] == []
    assert scores["score"].value is None and scores["score"].unscored_reason.startswith("nothing checkable")
    assert "none of the report's 4 uncited sentences" in scores["score"].unscored_reason
    assert searches == []


def test_a_report_without_uncited_sentences_is_unscored_without_a_call(searches):
    report = make_report([("ALPHA [1].", [1]), ("[2].", [2])])
    assert METRIC.items(report) == []
    (score,) = METRIC.score(report, [])
    assert score.value is None and "no uncited sentence" in score.unscored_reason


def test_a_number_that_is_not_an_uncited_sentence_is_refused_and_re_asked(searches):
    report = make_report(SENTENCES)
    cited = json.dumps([{"sentence": 1, "claim": "Retrieval helps generation."}])  # sentence 1 cites [1]
    client = ScriptedJudge([cited, json.dumps(THREE_CLAIMS[:1]), json.dumps(SUPPORTED)])
    (judgment,), scores = judge_and_score(METRIC, report, client)
    assert judgment.calls == 3 and scores["score"].value == 1.0
    assert "must be one of the listed numbers (2, 3, 4, 5); got 1" in client.requests[1][1][-1]["content"]
    # Never answered well: the item, and so the report, is unscored with the reason.
    (judgment,), scores = judge_and_score(METRIC, report, ScriptedJudge(cited, max_reasks=1))
    assert not judgment.scored and judgment.calls == 2
    assert judgment.unscored_reason.startswith("claim extraction: ")
    assert scores["score"].value is None and "1 of 1 items unscored" in scores["score"].unscored_reason


def test_a_verdict_never_answered_leaves_the_report_unscored(searches):
    report = make_report(SENTENCES)
    client = ScriptedJudge([json.dumps(THREE_CLAIMS), json.dumps(SUPPORTED), "supported", "supported"],
                           max_reasks=1)
    (judgment,), scores = judge_and_score(METRIC, report, client)
    assert not judgment.scored and judgment.calls == 4  # the third claim is not asked
    assert judgment.unscored_reason.startswith("claim 2 (sentence 4): ")
    assert scores["score"].value is None


@pytest.mark.parametrize(("text", "expected"), [
    ("[]", []),
    ('```json\n[{"sentence": 5, "claim": " B  holds. "}, {"sentence": 2, "claim": "A"}]\n```', [(2, "A"), (5, "B holds.")]),
])
def test_parse_claims_reads_a_json_array_in_sentence_order(text, expected):
    assert parse_claims(text, [2, 3, 5]) == expected


@pytest.mark.parametrize("text", [
    '[{"sentence": 1, "claim": "x"}]',  # not offered (a cited sentence)
    '[{"sentence": 2, "claim": "x"}, {"sentence": 2, "claim": "y"}]',  # twice
    '[{"sentence": 2, "claim": "x", "reason": "r"}]',  # an extra key
    '[{"sentence": 2}]',
    '[{"claim": "x"}]',
    '[{"sentence": "2", "claim": "x"}]',
    '[{"sentence": 2.0, "claim": "x"}]',
    '[{"sentence": true, "claim": "x"}]',
    '[{"sentence": 2, "claim": " "}]',
    '[{"sentence": 2, "claim": null}]',
    '[2]',
    '{"sentence": 2, "claim": "x"}',
    'Sentence 2 claims x.',
    '[{"sentence": 2, "claim": "x"}] and more',
])
def test_parse_claims_is_strict(text):
    with pytest.raises(ParseError):
        parse_claims(text, [2, 3, 5])


def test_parse_verdict_reads_a_verdict_and_its_papers():
    assert parse_verdict('{"verdict": " Supported ", "papers": [2, 1], "reason": " says so "}', 3) == (
        "supported", [2, 1], "says so")
    assert parse_verdict('{"verdict": "not_enough_evidence", "papers": [], "reason": "silent"}', 3) == (
        "not_enough_evidence", [], "silent")
    assert parse_verdict('{"verdict": "contradicted", "papers": [3], "reason": "no"}', 3)[0] == "contradicted"


@pytest.mark.parametrize("text", [
    '{"verdict": "true", "papers": [1], "reason": "x"}',
    '{"verdict": "partially_supported", "papers": [1], "reason": "x"}',
    '{"verdict": "supported", "papers": [], "reason": "x"}',  # a verdict resting on nothing
    '{"verdict": "contradicted", "papers": [], "reason": "x"}',
    '{"verdict": "not_enough_evidence", "papers": [1], "reason": "x"}',
    '{"verdict": "supported", "papers": [4], "reason": "x"}',  # no paper 4
    '{"verdict": "supported", "papers": [0], "reason": "x"}',
    '{"verdict": "supported", "papers": [1, 1], "reason": "x"}',
    '{"verdict": "supported", "papers": ["1"], "reason": "x"}',
    '{"verdict": "supported", "papers": [true], "reason": "x"}',
    '{"verdict": "supported", "papers": 1, "reason": "x"}',
    '{"verdict": "supported", "papers": [1]}',
    '{"verdict": "supported", "papers": [1], "reason": ""}',
    '{"papers": [1], "reason": "x"}',
    '[{"verdict": "supported", "papers": [1], "reason": "x"}]',
    'supported',
])
def test_parse_verdict_is_strict(text):
    with pytest.raises(ParseError):
        parse_verdict(text, 3)


def test_evidence_is_only_papers_before_the_cutoff_never_the_query_paper(searches):
    leaky = [paper(QUERY_ID + "v2", "ALPHA: the query paper itself"),
             paper("2501.00020", "ALPHA at the cutoff", published=CUTOFF),
             paper("2501.00021", "ALPHA after the cutoff", published=CUTOFF + timedelta(days=1)),
             SearchResult("2301.00022", "ALPHA undated", "", None),
             paper("2401.00010v3", "ALPHA reaches 90 percent (a second version)"),
             *PAPERS]

    class Unbounded(MemorySearch):  # ignores k, so the duplicate below comes back too
        def search(self, text, k=10):
            return super().search(text, len(self.papers))

    METRIC.bind(RELEASE_ID, lambda scope: Unbounded(scope, leaky, searches))
    report = make_report(SENTENCES)
    client = ScriptedJudge(judge_answers(THREE_CLAIMS[:1], {"ALPHA": SUPPORTED}))
    (judgment,), _ = judge_and_score(METRIC, report, client)
    evidence = judgment.label["claims"][0]["evidence"]
    assert [e["arxiv_id"] for e in evidence] == ["2401.00010v3", "2401.00013"]
    assert all(e["published"] < CUTOFF.date().isoformat() for e in evidence)


def test_a_query_without_a_date_is_unscored_without_a_call(searches):
    report = make_report(SENTENCES, published=None)
    client = ScriptedJudge(judge_answers(THREE_CLAIMS, {}))
    (judgment,), scores = judge_and_score(METRIC, report, client)
    assert not judgment.scored and "no publication date" in judgment.unscored_reason and client.asked == []
    assert not METRIC.judge_local(report, METRIC.items(report))[0].scored


def test_judging_a_release_nothing_was_bound_for_is_a_bug():
    report = replace(make_report(SENTENCES), release_id="1999-01")
    with pytest.raises(RuntimeError, match="no evidence search is bound for release 1999-01"):
        METRIC.judge_llm(ScriptedJudge("[]"), report, METRIC.items(report)[0])


def test_prepare_binds_the_default_local_search_to_the_querys_cutoff():
    engine = sa.create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")  # never connected here
    try:
        METRIC.prepare(engine, "2000-01")
        tool = METRIC._search_for["2000-01"](EvidenceScope(QUERY_ID, CUTOFF))
        assert isinstance(tool, LocalSearch) and tool.engine is engine
        assert tool.cutoff == CUTOFF and tool.exclude_ids == [QUERY_ID]
    finally:
        METRIC.unbind("2000-01")
        engine.dispose()


def test_the_human_exemplar_is_judged_like_any_report(searches):
    report = make_report(SENTENCES, kind="human_exemplar")
    assert METRIC.fixed_scores(report) is None and METRIC.items(report)
    client = ScriptedJudge(judge_answers(THREE_CLAIMS[:2], {"ALPHA": SUPPORTED, "BETA": NOT_ENOUGH}))
    assert judge_and_score(METRIC, report, client)[1]["score"].value == 0.5


def test_a_label_of_another_shape_is_a_bug_not_a_score():
    report = make_report(SENTENCES)
    with pytest.raises(ValueError, match="must be"):
        METRIC.score(report, [item_judgment("uncited", {"claims": [{"verdict": "maybe"}]})])


def test_the_judge_stub_answers_both_prompts_well_formed(searches):
    """tests/support/judge_stub.py, which judges whole months over HTTP, gives parseable answers."""
    def stub(prompt: str) -> str:
        return scripted_judge({"messages": [{"role": "user", "content": prompt}]})

    report = make_report(SENTENCES)
    client = ScriptedJudge(stub, max_reasks=0)
    (judgment,), scores = judge_and_score(METRIC, report, client)
    assert judgment.scored and judgment.calls == len(client.requests) >= 1
    assert {c["sentence"] for c in judgment.label["claims"]} <= {2, 3, 4, 5}


@pytest.mark.parametrize(("text", "claim"), [
    ("ALPHA reaches 90 percent accuracy on the standard benchmark.", True),  # a digit
    ("The method was introduced by Google Research for machine translation tasks.", True),  # a name
    ("Dense retrieval is introduced for open-domain question answering tasks.", False),  # no digit, no name
    ("Retrieval reaches 90 percent.", False),  # fewer than 8 words
    ("We compare 12 systems on the Natural Questions benchmark in detail.", False),  # about the report
    ("This section reviews 12 systems on the Natural Questions benchmark.", False),
    ("In this section, 12 systems are reviewed on the Natural Questions benchmark.", False),
    ("Our survey covers 12 systems on the Natural Questions benchmark.", False),
    ("Weather models predict 10 days ahead with surprising skill overall.", True),  # "We..." is not "We"
    ("Transformers Are widely used in many areas of modern research.", False),  # the first word is no name
    ("It is used in Paris, London and elsewhere across many research groups.", False),  # broken by a comma
    ("It is used by (Meta AI) and many other research groups today.", True),
])
def test_the_local_extraction_heuristic(text, claim):
    assert heuristic_claim(text) is claim


@needs_model
def test_local_judge_supports_by_cosine_never_contradicts_and_repeats_itself():
    corpus = [paper("2401.00030", "Dense passage retrieval for open-domain question answering",
                    "Dense passage retrieval with a dual BERT encoder outperforms BM25 by 9 points of top-20 "
                    "accuracy on Natural Questions."),
              paper("2401.00031", "Protein folding with molecular dynamics", "We simulate 12 proteins.")]

    class Everything(MemorySearch):
        def search(self, text, k=10):
            return self.papers[:k]

    METRIC.bind(RELEASE_ID, lambda scope: Everything(scope, corpus, []))
    try:
        report = make_report([
            ("Dense passage retrieval with a dual BERT encoder outperforms BM25 by 9 points on Natural Questions.",
             []),
            ("The stock market in 2020 fell sharply during the spring months of that year.", []),
            ("We review 12 systems in this section of the report.", []),  # about the report: no claim
            ("Retrieval matters.", [])])
        items = METRIC.items(report)
        (judgment,) = METRIC.judge_local(report, items)
        assert [(c["sentence"], c["verdict"]) for c in judgment.label["claims"]] == [
            (1, "supported"), (2, "not_enough_evidence")]
        assert judgment.label["claims"][0]["papers"] == ["2401.00030"]
        assert f">= {SUPPORT_COSINE}" in judgment.label["claims"][0]["reason"]
        assert judgment.explanation.startswith("local embedding judge, not an LLM") and "never contradicted" in (
            judgment.explanation)
        assert METRIC.judge_local(report, items) == [judgment]
        assert METRIC.score(report, [judgment])[0].value == 0.5
    finally:
        METRIC.unbind(RELEASE_ID)
