"""Every judge question's answer has a budget and a schema, and the schema says what the metric's parser
accepts: a well-formed answer is valid under both, and a wrong label is refused by both (so a server that
decodes under the schema can only produce answers that parse)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import Batch, BatchJudgedMetric, Item, LLMJudgedMetric
from deepscholar.evaluation.metrics.claims.base import ClaimsMetric
from deepscholar.evaluation.metrics.core.nugget_coverage import NuggetCoverage
from deepscholar.evaluation.metrics.race.base import RaceMetric
from deepscholar.evaluation.metrics.reportbench import uncited_claim_support
from deepscholar.llm.client import ParseError, parse_json_array, parse_json_object
from deepscholar.release import judging

GRADED = json.dumps([{"analysis": "the first names more work", "article_1": 7, "article_2": 5.5}] * 2)


def item_and_answers(metric: LLMJudgedMetric) -> tuple[Item, str, str]:
    """(an item of two sub-items or one question, a good answer, an answer with a label outside the set)."""
    if isinstance(metric, BatchJudgedMetric):
        good = json.dumps(list(metric.labels[:2]) if len(metric.labels) > 1 else [metric.labels[0]] * 2)
        return Item("k", Batch(("one claim", "another claim"))), good, json.dumps([metric.labels[0], "maybe"])
    if isinstance(metric, NuggetCoverage):
        return Item("k", ["a nugget", "another"]), '["support", "partial_support"]', '["support", "yes"]'
    if isinstance(metric, RaceMetric):
        return Item("k", [{"criterion": "a"}, {"criterion": "b"}]), GRADED, GRADED.replace("5.5", "12")
    shapes = {"organization": ('{"decision": "B", "explanation": "clearer"}', '{"decision": "C", "explanation": "x"}'),
              "relevance_rate": ('{"grade": 2, "explanation": "on topic"}', '{"grade": 3, "explanation": "x"}'),
              "citation_precision": ('{"supported": true, "explanation": "it says so"}',
                                     '{"supported": "yes", "explanation": "x"}'),
              "claim_coverage": ('{"supported": false, "explanation": "not there"}',
                                 '{"supported": 1, "explanation": "x"}'),
              "cited_statement_match": ('{"quote": "a passage", "match": true, "reason": "same"}',
                                        '{"quote": "a passage", "match": "yes", "reason": "same"}')}
    good, bad = shapes[metric.name]
    return Item("k", ("s", "statement", "source text")), good, bad


def asking_metrics() -> list[LLMJudgedMetric]:
    """Every registered metric asked one item at a time through LLMJudgedMetric.ask (uncited claim support
    asks its own two questions: checked below)."""
    return [m for m in registry.metrics() if isinstance(m, LLMJudgedMetric)
            and m.name != uncited_claim_support.NAME]


@pytest.mark.parametrize("metric", asking_metrics(), ids=lambda m: m.name)
def test_each_metric_declares_a_budget_and_a_schema_its_parser_agrees_with(metric):
    item, good, bad = item_and_answers(metric)
    schema = metric.answer_schema(item)
    assert schema is not None, f"{metric.name} has no answer schema"
    assert 0 < metric.answer_budget(item) <= 2048
    jsonschema.validate(json.loads(good), schema)
    metric.parse(good, item)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(bad), schema)
    with pytest.raises(ParseError):
        metric.parse(bad, item)
    if isinstance(metric, ClaimsMetric | NuggetCoverage | RaceMetric | BatchJudgedMetric):
        # one element short: refused by the schema's exact count as by the parser
        short = json.dumps(json.loads(good)[:1])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(short), schema)
        with pytest.raises(ParseError):
            metric.parse(short, item)
        assert metric.answer_budget(Item("k", Batch(tuple("abcdefgh")))
                                    if isinstance(metric, BatchJudgedMetric) else Item("k", list("abcdefgh"))) \
            > metric.answer_budget(item), "the budget grows with the sub-items"


def test_the_other_questions_declare_theirs_too():
    claims = uncited_claim_support.claims_answer([2, 5])
    jsonschema.validate([{"sentence": 5, "claim": "X beats Y"}], claims["schema"])
    uncited_claim_support.parse_claims('[{"sentence": 5, "claim": "X beats Y"}]', [2, 5])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"sentence": 3, "claim": "X"}], claims["schema"])
    verdict = uncited_claim_support.verdict_answer(2)
    good = {"verdict": "supported", "papers": [2], "reason": "paper 2 says so"}
    jsonschema.validate(good, verdict["schema"])
    uncited_claim_support.parse_verdict(json.dumps(good), 2)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "papers": [3]}, verdict["schema"])
    importance = {"important": True, "reason": "cited as the base method"}
    jsonschema.validate(importance, judging.IMPORTANCE_ANSWER["schema"])
    assert judging.parse_importance(json.dumps(importance))[0] is True
    nuggets = judging.nuggets_answer(2)
    jsonschema.validate(["a fact", "another"], nuggets["schema"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(["a", "b", "c"], nuggets["schema"])
    for answer in (claims, verdict, judging.IMPORTANCE_ANSWER, nuggets):
        assert answer["max_tokens"] > 0
    assert parse_json_array("[]") == [] and parse_json_object("{}") == {}


def test_a_budget_is_one_number_only_where_it_does_not_grow_with_the_item():
    """`deepscholar cost` caps a call's predicted output tokens at the metric's budget only where the budget is
    one number: a RACE answer of 8 criteria may take 48 + 8 x 240 tokens, far over the 320 default."""
    by_name = {m.name: m for m in registry.metrics() if isinstance(m, LLMJudgedMetric)}
    assert by_name["organization"].fixed_answer_budget == by_name["organization"].answer_tokens == 320
    assert by_name["cited_statement_match"].fixed_answer_budget == 640
    for name in ("nugget_coverage", "race_overall"):
        assert by_name[name].fixed_answer_budget is None, name
    assert all(m.fixed_answer_budget is None for m in by_name.values() if isinstance(m, BatchJudgedMetric))
