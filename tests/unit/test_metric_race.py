"""RACE on hand-made rubrics and grades whose answers are known: the rubric's normalisation, S_d, S_int and
the reference-relative ratio, the human row's 0.5, zero denominators, strict parsing of the analysis-then-
scores answer (race_scoring_v2), and the one question five metrics share."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support.judge_stub import scripted_judge
from support.metric_support import ScriptedJudge, judge_and_score, needs_model, query_info, report_context

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.race.base import (
    CriterionGrade,
    article_text,
    parse_criterion_scores,
    race_scores,
    reference_text,
)
from deepscholar.evaluation.metrics.race.query_data import RaceCriterion, RaceDimension
from deepscholar.evaluation.metrics.race.race_comprehensiveness import METRIC as COMPREHENSIVENESS
from deepscholar.evaluation.metrics.race.race_insight import METRIC as INSIGHT
from deepscholar.evaluation.metrics.race.race_overall import METRIC as OVERALL
from deepscholar.evaluation.metrics.race.rubrics import local_rubric, parse_criteria, parse_weights
from deepscholar.llm.client import ParseError

# Comprehensiveness (W = .4): two criteria of weight .5, target 8 and 6, reference 4 and 4 -> S = 7 vs 4.
# Insight (W = .6): one criterion, target 3, reference 6 -> S = 3 vs 6.
# S_int: target .4 * 7 + .6 * 3 = 4.6, reference .4 * 4 + .6 * 6 = 5.2 -> overall 4.6 / 9.8.
RUBRIC = (
    RaceDimension("comprehensiveness", 0.4, (RaceCriterion("dense retrieval", "covers DPR", 0.5),
                                             RaceCriterion("sparse retrieval", "covers BM25", 0.5))),
    RaceDimension("insight", 0.6, (RaceCriterion("positions the paper", "says how it differs", 1.0),)),
)
GRADES = [{"analysis": "1 covers DPR in depth, 2 names it", "article_1": 8, "article_2": 4},
          {"analysis": "1 contrasts BM25, 2 lists it", "article_1": 6, "article_2": 4},
          {"analysis": "2 says how the paper differs, 1 does not", "article_1": 3, "article_2": 6}]


def report(kind: str = "deepscholar_base", rubric=RUBRIC):
    query = query_info(title="Retrieval paper", abstract="We retrieve.", exemplar_text="Prior work [@a] did X.\n\nMore [@b].")
    return report_context(text="We survey retrieval [1].\n\n## References\n1. Karpukhin et al. DPR. 2020.",
                          query=replace(query, family_data={"race": rubric}), system_kind=kind)


def test_the_ratio_weighs_criteria_within_dimensions_then_dimensions():
    judge = ScriptedJudge(json.dumps(GRADES))
    _, overall = judge_and_score(OVERALL, report(), judge)
    assert overall["score"].value == pytest.approx(4.6 / 9.8)  # not the weighted mean of the two ratios (.4545)
    assert overall["score"].details["s_int_target"] == pytest.approx(4.6)
    _, comprehensiveness = judge_and_score(COMPREHENSIVENESS, report(), judge)
    _, insight = judge_and_score(INSIGHT, report(), judge)
    assert comprehensiveness["score"].value == pytest.approx(7 / 11)
    assert insight["score"].value == pytest.approx(1 / 3)


def test_the_five_metrics_ask_one_identical_question_with_the_target_as_article_one():
    judge = ScriptedJudge(json.dumps(GRADES))
    for metric in (OVERALL, COMPREHENSIVENESS, INSIGHT):
        judge_and_score(metric, report(), judge)
    assert len(set(judge.prompts)) == 1 and set(judge.purposes) == {"metric.race"}
    prompt = judge.prompts[0]
    article_1 = prompt.split("Article 1:")[1].split("Article 2:")[0]
    assert "We survey retrieval." in article_1 and "[1]" not in article_1 and "Karpukhin" not in article_1
    assert "Prior work did X." in prompt.split("Article 2:")[1] and "[@a]" not in prompt
    assert "1. [comprehensiveness] dense retrieval: covers DPR" in prompt and "exactly 3 objects" in prompt
    assert '[{"analysis": ' in prompt and "first compare how the two sections meet" in prompt


def test_the_metric_version_names_the_analysis_prompt():
    for metric in (OVERALL, COMPREHENSIVENESS, INSIGHT):
        assert metric.version == "d1+race_scoring_v2"


def test_the_analysis_is_kept_in_the_stored_label_beside_the_scores():
    judge = ScriptedJudge(json.dumps(GRADES))
    (judgment,), _ = judge_and_score(OVERALL, report(), judge)
    assert [(g["criterion"], g["analysis"], g["article_1"], g["article_2"]) for g in judgment.label] == [
        ("dense retrieval", "1 covers DPR in depth, 2 names it", 8.0, 4.0),
        ("sparse retrieval", "1 contrasts BM25, 2 lists it", 6.0, 4.0),
        ("positions the paper", "2 says how the paper differs, 1 does not", 3.0, 6.0)]
    assert "comparative analysis" in judgment.explanation


def test_an_answer_without_an_analysis_or_a_score_is_asked_again():
    no_analysis = [{k: v for k, v in g.items() if k != "analysis"} for g in GRADES]
    no_score = [GRADES[0], GRADES[1], {"analysis": "2 is better", "article_1": 3}]
    judge = ScriptedJudge([json.dumps(no_analysis), json.dumps(no_score), json.dumps(GRADES)])
    (judgment,), scores = judge_and_score(OVERALL, report(), judge)
    assert judgment.calls == 3 and scores["score"].value == pytest.approx(4.6 / 9.8)
    (_, first_reask), (_, second_reask) = judge.requests[1], judge.requests[2]
    assert 'criterion 1: "analysis" must be a non-empty text' in first_reask[-1]["content"]
    assert "criterion 3: article_2 must be a number from 0 to 10" in second_reask[-1]["content"]
    # An analysis the judge never gives leaves the report unscored after the re-asks, never scored without it.
    stubborn = ScriptedJudge(json.dumps(no_analysis))
    (judgment,), scores = judge_and_score(OVERALL, report(), stubborn)
    assert scores["score"].value is None and "analysis" in judgment.unscored_reason


def test_the_human_section_is_half_by_construction_and_a_missing_rubric_is_unscored():
    judge = ScriptedJudge(AssertionError("no call expected"))
    assert OVERALL.items(report("human_exemplar")) == []
    _, human = judge_and_score(OVERALL, report("human_exemplar"), judge)
    assert human["score"].value == 0.5
    _, missing = judge_and_score(OVERALL, report(rubric=()), judge)
    assert missing["score"].value is None
    assert "deepscholar release enrich 2025-01 --tracks race" in missing["score"].unscored_reason
    assert judge.requests == []


def test_the_scripted_month_judge_answers_with_an_analysis_per_criterion():
    """support/judge_stub.py, which judges whole months over HTTP, answers the v2 prompt in its shape."""
    judge = ScriptedJudge(lambda prompt: scripted_judge({"messages": [{"role": "user", "content": prompt}]}))
    (judgment,), scores = judge_and_score(OVERALL, report(), judge)
    assert judgment.scored and judgment.calls == 1 and len(judgment.label) == 3
    assert all(g["analysis"].startswith("article ") for g in judgment.label)


def test_both_articles_at_zero_is_unscored_not_half():
    judge = ScriptedJudge(json.dumps([{"analysis": "both miss it", "article_1": 0, "article_2": 0}] * 3))
    _, scores = judge_and_score(OVERALL, report(), judge)
    assert scores["score"].value is None and "undefined" in scores["score"].unscored_reason
    # Unscored, not the authors' 0 (nor 0.5): the same holds for every dimension's metric.
    _, insight = judge_and_score(INSIGHT, report(), judge)
    assert insight["score"].value is None and insight["score"].details["s_int_target"] == 0


def test_a_dimension_at_zero_over_zero_is_unscored_alone():
    # Comprehensiveness (W = .4): 8 vs 4 and 6 vs 4 -> 7 vs 4; insight (W = .6): 0 vs 0 -> undefined.
    # S_int: target .4 * 7 = 2.8, reference .4 * 4 = 1.6 -> overall 2.8 / 4.4; comprehensiveness 7 / 11.
    zero_insight = [*GRADES[:2], {"analysis": "neither positions the paper", "article_1": 0, "article_2": 0}]
    judge = ScriptedJudge(json.dumps(zero_insight))
    _, overall = judge_and_score(OVERALL, report(), judge)
    _, comprehensiveness = judge_and_score(COMPREHENSIVENESS, report(), judge)
    _, insight = judge_and_score(INSIGHT, report(), judge)
    assert overall["score"].value == pytest.approx(2.8 / 4.4)
    assert comprehensiveness["score"].value == pytest.approx(7 / 11)
    assert insight["score"].value is None and "undefined" in insight["score"].unscored_reason
    assert overall["score"].details["dimensions"]["insight"]["ratio"] is None


def test_grades_are_parsed_strictly():
    assert parse_criterion_scores('[{"analysis": " 1 is better ", "article_1": 10, "article_2": 0}]', 1) == [
        CriterionGrade("1 is better", 10.0, 0.0)]
    assert parse_criterion_scores('[{"criterion": "echoed", "analysis": "a", "article_1": 2.5, "article_2": 7}]',
                                  1) == [("a", 2.5, 7.0)]  # other keys are ignored
    ok = '{"analysis": "a", "article_1": 1, "article_2": 2}'
    for bad, why in [(f'[{ok}]', "exactly 2"),
                     (f'[{{"analysis": "a", "article_1": 11, "article_2": 2}}, {ok}]', "from 0 to 10"),
                     (f'[{{"analysis": "a", "article_1": true, "article_2": 2}}, {ok}]', "from 0 to 10"),
                     (f'[{{"analysis": "a", "article_1": 1}}, {ok}]', "article_2"),
                     (f'[{ok}, {{"article_1": 1, "article_2": 2}}]', 'criterion 2: "analysis"'),
                     (f'[{ok}, {{"analysis": "  ", "article_1": 1, "article_2": 2}}]', 'criterion 2: "analysis"'),
                     (f'[{ok}, {{"analysis": 3, "article_1": 1, "article_2": 2}}]', 'criterion 2: "analysis"'),
                     (f'[{ok}, [1, 2]]', "criterion 2: expected an object")]:
        with pytest.raises(ParseError, match=why):
            parse_criterion_scores(bad, 2)
    judge = ScriptedJudge("not json")
    _, scores = judge_and_score(OVERALL, report(), judge)
    assert scores["score"].value is None  # unscored after the re-asks, never 0


def test_race_scores_from_stored_grades():
    graded = [{"dimension": "d", "dimension_weight": 1.0, "weight": 1.0, "article_1": 5, "article_2": 5}]
    assert race_scores(graded)["overall"] == 0.5


def test_the_rubric_weights_are_renormalised_and_say_so():
    weights, raw, renormalised = parse_weights(
        '{"comprehensiveness": 4, "insight": 3, "instruction_following": 2, "readability": 1, "reason": "r"}')
    assert renormalised and raw["comprehensiveness"] == 4 and weights["comprehensiveness"] == pytest.approx(0.4)
    assert sum(weights.values()) == pytest.approx(1.0)
    exact = parse_weights('{"comprehensiveness": 0.25, "insight": 0.25, "instruction_following": 0.25, '
                          '"readability": 0.25}')
    assert exact[2] is False
    with pytest.raises(ParseError, match="missing weight"):
        parse_weights('{"comprehensiveness": 1}')
    with pytest.raises(ParseError, match="sum to 0"):
        parse_weights('{"comprehensiveness": 0, "insight": 0, "instruction_following": 0, "readability": 0}')


def test_criteria_are_three_to_eight_with_weights_summing_to_one():
    three = [{"criterion": f"c{i}", "explanation": "e", "weight": 2} for i in range(3)]
    parsed = parse_criteria(json.dumps(three))
    assert [c.weight for c in parsed] == pytest.approx([1 / 3] * 3) and parsed[0].raw_weight == 2
    with pytest.raises(ParseError, match="3 to 8"):
        parse_criteria(json.dumps(three[:2]))
    with pytest.raises(ParseError, match="non-empty"):
        parse_criteria(json.dumps([*three[:2], {"criterion": " ", "explanation": "e", "weight": 1}]))


def test_the_local_rubric_is_deterministic_and_complete():
    rubric = local_rubric("Paper", ["Dense Passage Retrieval", "BM25", "Dense Passage Retrieval"], ["vital one"])
    assert set(rubric.criteria) == {"comprehensiveness", "insight", "instruction_following", "readability"}
    assert sum(rubric.weights.values()) == pytest.approx(1.0)
    assert [c.criterion for c in rubric.criteria["comprehensiveness"]] == [
        "covers Dense Passage Retrieval", "covers BM25", "says: vital one"]
    assert all(sum(c.weight for c in cs) == pytest.approx(1.0) for cs in rubric.criteria.values())
    assert local_rubric("Paper", ["Dense Passage Retrieval", "BM25"], ["vital one"]) == local_rubric(
        "Paper", ["Dense Passage Retrieval", "BM25"], ["vital one"])


def test_articles_lose_markers_and_reference_lists_but_keep_paragraphs():
    assert article_text("One [1][2].\n\nTwo [3].\n\nReferences\n1. A. B. Title. 2020.\n2. C. Title. 2021.") == \
        "One.\n\nTwo."
    assert reference_text("A [@x; @y] b.\n\nC.") == "A b.\n\nC."


def test_race_is_a_track_ranked_by_its_overall_score():
    assert registry.metric_names("race")[0] == "race_overall" and registry.ranking_metric("race") == "race_overall"
    assert "race_overall" not in registry.judged_metric_names()


@needs_model
def test_the_local_judge_grades_both_articles_deterministically():
    ctx = report()
    (first,) = OVERALL.judge_local(ctx, OVERALL.items(ctx))
    (again,) = OVERALL.judge_local(ctx, OVERALL.items(ctx))
    assert first.label == again.label and len(first.label) == 3
    assert all(0 <= g["article_1"] <= 10 and 0 <= g["article_2"] <= 10 for g in first.label)
    assert "local embedding judge" in first.explanation
