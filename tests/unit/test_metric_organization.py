"""Organization without a network: items, the two-order score, the prompt, and the local judge."""

from __future__ import annotations

import json
import re

import pytest
from support.metric_support import ScriptedJudge, item_judgment, needs_model, query_info, report_context

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.base import Metric, unscored_item
from deepscholar.evaluation.metrics.core.organization import (
    METRIC,
    coherence,
    parse_decision,
    render_exemplar,
    report_body,
)
from deepscholar.llm.client import ParseError

ORGANISED = (
    "Retrieval-augmented generation conditions a language model on passages fetched by a retriever [@lewis]. "
    "The retrieved passages give the generator evidence it can quote and cite [@guu]. "
    "Such retrieval-augmented models reduce hallucinated facts in generated answers [@lewis].\n\n"
    "Citation recommendation suggests papers that a scientific manuscript should cite [@cite]. "
    "Recommenders rank candidate papers by how well they match the manuscript's context [@cite; @rank]. "
    "Good citation recommenders help authors find the prior work they have missed [@rank].\n"
)
# The same facts shuffled across paragraphs, one sentence repeated: poorer organisation by every criterion.
JUMBLED = (
    "Retrieval-augmented generation conditions a language model on passages fetched by a retriever [1]. "
    "Recommenders rank candidate papers by how well they match the manuscript's context [2]. "
    "Retrieval-augmented generation conditions a language model on passages fetched by a retriever [1].\n\n"
    "Good citation recommenders help authors find the prior work they have missed [3]. "
    "The retrieved passages give the generator evidence it can quote and cite [4]. "
    "Citation recommendation suggests papers that a scientific manuscript should cite [2]. "
    "Such retrieval-augmented models reduce hallucinated facts in generated answers [1].\n"
)


def make_query(exemplar: str = ORGANISED):
    return query_info(title="Citing with retrieval", abstract="We write cited related-work sections with retrieval.",
                      exemplar_text=exemplar)


def make_report(text: str = JUMBLED, *, kind: str = "llm", exemplar: str = ORGANISED, system_id: str = "sys"):
    return report_context(text=text, query=make_query(exemplar), system_id=system_id, system_kind=kind)


def judged(first: str, second: str):
    """Judgments where `first`/`second` name the winner when the report is shown first/second."""
    out = []
    for key, report_at, winner in (("order:report_first", "A", first), ("order:report_second", "B", second)):
        decision = report_at if winner == "report" else ("B" if report_at == "A" else "A")
        out.append(item_judgment(key, {"decision": decision, "winner": winner}))
    return out


def test_registry_and_protocol():
    assert get_metric("organization") is METRIC
    assert isinstance(METRIC, Metric)
    assert METRIC.variants == ("score",) and METRIC.headline == "score"
    assert METRIC.version == "d2+organization_v2"


def test_items_are_the_two_orders():
    items = METRIC.items(make_report())
    assert [i.key for i in items] == ["order:report_first", "order:report_second"]
    assert [i.payload for i in items] == ["A", "B"]


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("report", "report", 1.0),
    ("report", "exemplar", 0.5),
    ("exemplar", "report", 0.5),
    ("exemplar", "exemplar", 0.0),
])
def test_score_is_wins_over_two_orders(first, second, expected):
    [score] = METRIC.score(make_report(), judged(first, second))
    assert score.variant == "score" and score.value == expected and score.unscored_reason is None
    assert score.n_items == 2
    assert score.details == {"report_first": first, "report_second": second}


def test_one_unscored_order_makes_the_report_unscored():
    judgments = [judged("report", "report")[0], unscored_item("order:report_second", "not valid JSON", 3)]
    [score] = METRIC.score(make_report(), judgments)
    assert score.value is None  # never 1.0 from the one order that was answered
    assert "order:report_second" in score.unscored_reason and "not valid JSON" in score.unscored_reason


def test_a_missing_order_is_unscored_not_counted_as_half():
    [score] = METRIC.score(make_report(), judged("report", "report")[:1])
    assert score.value is None and "order:report_second" in score.unscored_reason


def test_human_exemplar_is_half_by_construction():
    report = make_report(ORGANISED, kind="human_exemplar")
    assert METRIC.items(report) == []
    [score] = METRIC.score(report, [])
    assert score.value == 0.5 and score.details == {"by_construction": True}


def test_parse_decision_is_strict():
    assert parse_decision('{"decision": "B", "explanation": "clearer grouping"}') == ("B", "clearer grouping")
    assert parse_decision('```json\n{"decision": "a", "explanation": "x"}\n```') == ("A", "x")
    for bad in ('{"decision": "tie", "explanation": "equal"}', '{"decision": "A"}',
                '{"decision": ["A"], "explanation": "x"}', "A is better.", '["A"]'):
        with pytest.raises(ParseError):
            parse_decision(bad)


def test_exemplar_markers_become_numbers_in_first_appearance_order():
    rendered = render_exemplar("RAG [@lewis; @guu] helps~[@lewis]. DPR [@dpr].")
    assert rendered == "RAG [1][2] helps [1]. DPR [3]."


def test_report_body_drops_the_reference_list():
    text = ("Retrieval helps [1]. It is cheap [2].\n\n"
            "## References\n[1] Lewis et al. 2020. RAG.\n[2] Guu 2020.")
    assert report_body(text) == "Retrieval helps [1]. It is cheap [2]."


def test_prompt_shows_the_report_in_the_asked_place_and_labels_the_winner():
    client = ScriptedJudge(['{"decision": "A", "explanation": "a"}', '{"decision": "A", "explanation": "b"}'])
    report = make_report(JUMBLED + "\n## References\n[1] Lewis 2020. RAG. arXiv:2005.11401\n")
    first, second = (METRIC.judge_llm(client, report, item) for item in METRIC.items(report))
    assert client.purposes == ["metric.organization"] * 2
    a_first = client.prompts[0].split("Section A:")[1].split("Section B:")[0]
    a_second = client.prompts[1].split("Section A:")[1].split("Section B:")[0]
    assert "Recommenders rank candidate papers" in a_first.split("The retrieved")[0]  # the report's order
    assert "[@" not in client.prompts[0] and "## References" not in client.prompts[0]
    assert "passages fetched by a retriever [1]. The retrieved" in a_second  # the rendered exemplar
    assert first.label == {"decision": "A", "winner": "report"} and first.explanation == "a"
    assert second.label == {"decision": "A", "winner": "exemplar"}
    json.dumps([first.label, second.label])
    assert METRIC.score(report, [first, second])[0].value == 0.5
    for criterion in ("themes", "paragraph", "repetition", "signposting", "tie is not allowed"):
        assert criterion in client.prompts[0]


def test_garbage_answer_gives_an_unscored_item():
    client = ScriptedJudge("Section A, clearly.")
    item = METRIC.items(make_report())[0]
    j = METRIC.judge_llm(client, make_report(), item)
    assert not j.scored and j.label is None and "not valid JSON" in j.unscored_reason


@needs_model
def test_local_coherence_prefers_organised_text_and_ignores_position():
    assert coherence(ORGANISED).score > coherence(JUMBLED).score
    assert coherence(JUMBLED).duplicates > 0
    assert coherence("").score == 0.0

    loser = make_report(JUMBLED, exemplar=ORGANISED)
    judgments = METRIC.judge_local(loser, METRIC.items(loser))
    assert [j.label["winner"] for j in judgments] == ["exemplar", "exemplar"]
    assert [j.label["decision"] for j in judgments] == ["B", "A"]
    assert judgments[0].explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
    assert METRIC.score(loser, judgments)[0].value == 0.0

    winner = make_report(render_exemplar(ORGANISED), exemplar=re.sub(r"\[(\d)\]", r"[@k\1]", JUMBLED))
    assert METRIC.score(winner, METRIC.judge_local(winner, METRIC.items(winner)))[0].value == 1.0
    assert METRIC.judge_local(winner, []) == []


@needs_model
def test_local_exact_tie_goes_to_a_and_splits():
    same = make_report(render_exemplar(ORGANISED), exemplar=ORGANISED)
    judgments = METRIC.judge_local(same, METRIC.items(same))
    assert [j.label["decision"] for j in judgments] == ["A", "A"]
    assert METRIC.score(same, judgments)[0].value == 0.5
    assert METRIC.judge_local(same, METRIC.items(same)) == judgments  # deterministic
