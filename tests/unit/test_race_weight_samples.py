"""RACE's dimension weights sampled N times per query at release time (evaluation/metrics/race/rubrics.py): each sample its
own request, re-normalised on its own, the rubric's weight the mean of the samples that parsed; hand-computed
means, a sample the judge cannot answer, the versions that name N, and the setting's validation."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from support.metric_support import ScriptedJudge

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.metrics.race import rubrics as race_rubrics
from deepscholar.evaluation.metrics.race.rubrics import (
    DIMENSIONS,
    WEIGHTS_ANSWER,
    WeightSample,
    mean_weights,
    sample_params,
    weights_version,
)
from deepscholar.prompts import load_prompt_file
from deepscholar.settings import Settings

QUERY = {"arxiv_id": "2501.00001", "title": "Dense retrieval for citations", "abstract": "We retrieve."}
PROMPTS = (load_prompt_file(race_rubrics.__package__, "race_weights_v1"), load_prompt_file(race_rubrics.__package__, "race_criteria_v1"))
CRITERIA = json.dumps([{"criterion": f"c{i}", "explanation": "e", "weight": 1 / 3} for i in range(3)])


def weights(c, i, f, r) -> str:
    return json.dumps({"comprehensiveness": c, "insight": i, "instruction_following": f, "readability": r,
                       "reason": "r"})


class RecordingJudge(ScriptedJudge):
    """A ScriptedJudge that also keeps each request's parameters (what, besides the messages, keys the cache)."""

    def __init__(self, script) -> None:
        super().__init__(script)
        self.params: list[dict] = []

    def complete(self, messages, *, purpose, **params):
        self.params.append({"purpose": purpose, **params})
        return super().complete(messages, purpose=purpose, **params)


def rubric_of(answers: list[str], samples: int):
    judge = RecordingJudge([*answers, *[CRITERIA] * len(DIMENSIONS)])
    return race_rubrics._llm_rubric(judge, PROMPTS, QUERY, samples), judge


def test_the_weights_are_the_mean_of_the_samples():
    judged, judge = rubric_of([weights(0.4, 0.3, 0.2, 0.1), weights(0.2, 0.3, 0.3, 0.2),
                               weights(0.3, 0.3, 0.25, 0.15)], samples=3)
    rubric = judged.value
    assert [rubric.weights[d] for d in DIMENSIONS] == pytest.approx([0.3, 0.3, 0.25, 0.15])
    assert sum(rubric.weights.values()) == pytest.approx(1.0, abs=1e-12)
    assert rubric.renormalised is False and judged.calls == 3 + 4
    assert [s.stored("insight") for s in rubric.weight_samples] == [
        {"sample": k, "weight": 0.3, "raw_weight": 0.3, "renormalised": False} for k in range(3)]
    assert [s.stored("comprehensiveness")["weight"] for s in rubric.weight_samples] == [0.4, 0.2, 0.3]
    # Three distinct requests of the same question: the sample's index is its seed, at temperature 1.
    asked = [p for p in judge.params if p["purpose"] == "release.race_weights"]
    budget = WEIGHTS_ANSWER["max_tokens"]  # every question carries its answer budget (no schema: unconstrained)
    assert asked == [{"purpose": "release.race_weights", "max_tokens": budget, "temperature": 1.0, "seed": k}
                     for k in range(3)]
    assert len({prompt for purpose, prompt in judge.asked if purpose == "release.race_weights"}) == 1


def test_a_sample_not_summing_to_one_is_renormalised_before_the_mean():
    # (4, 3, 2, 1) -> (.4, .3, .2, .1); with (.2, .3, .3, .2): mean (.3, .3, .25, .15). Averaging the raw values
    # instead would give (2.1, 1.65, 1.15, .6) / 5.5 = (.382, .3, .209, .109): the re-normalised ones count alike.
    judged, _ = rubric_of([weights(4, 3, 2, 1), weights(0.2, 0.3, 0.3, 0.2)], samples=2)
    rubric = judged.value
    assert [rubric.weights[d] for d in DIMENSIONS] == pytest.approx([0.3, 0.3, 0.25, 0.15])
    assert [rubric.raw_weights[d] for d in DIMENSIONS] == pytest.approx([2.1, 1.65, 1.15, 0.6])  # the judge's, averaged
    assert rubric.renormalised is True  # one sample used was scaled
    assert [s.renormalised for s in rubric.weight_samples] == [True, False]
    assert rubric.weight_samples[0].stored("comprehensiveness") == {
        "sample": 0, "weight": pytest.approx(0.4), "raw_weight": 4.0, "renormalised": True}


def test_a_sample_the_judge_cannot_answer_is_recorded_and_left_out_of_the_mean():
    bad = "the weights are about equal"  # not JSON: re-asked twice (max_reasks), then the sample is unscored
    judged, judge = rubric_of([weights(0.4, 0.3, 0.2, 0.1), bad, bad, bad, weights(0.2, 0.3, 0.3, 0.2)], samples=3)
    rubric = judged.value
    assert [rubric.weights[d] for d in DIMENSIONS] == pytest.approx([0.3, 0.3, 0.25, 0.15])  # of samples 0 and 2
    assert judged.calls == 1 + 3 + 1 + 4
    failed = rubric.weight_samples[1]
    assert failed.weights is None and failed.stored("readability") == {
        "sample": 1, "unscored": "unparseable after 3 answers: not valid JSON (Expecting value at line 1 column 1)"}
    # The re-asks of sample 1 keep its parameters: they are its own conversation, not sample 0's or 2's.
    assert [p.get("seed") for p in judge.params if p["purpose"] == "release.race_weights"] == [0, 1, 1, 1, 2]


def test_no_sample_answered_leaves_the_query_unscored():
    judged, _ = rubric_of(["nope"] * 6, samples=2)
    assert judged.value is None and judged.calls == 6
    assert judged.unscored_reason.startswith("dimension weights: none of 2 samples answered; the first: "
                                             "unparseable after 3 answers")
    single, _ = rubric_of(["nope"] * 3, samples=1)
    assert single.unscored_reason.startswith("dimension weights: unparseable after 3 answers")  # as before sampling


def test_one_sample_is_the_deterministic_call_of_before():
    judged, judge = rubric_of([weights(0.4, 0.3, 0.2, 0.1)], samples=1)
    assert [judged.value.weights[d] for d in DIMENSIONS] == [0.4, 0.3, 0.2, 0.1]
    # the client's defaults (temperature 0, seed 0) and the answer's budget
    assert judge.params[0] == {"purpose": "release.race_weights", "max_tokens": WEIGHTS_ANSWER["max_tokens"]}
    assert len(judged.value.weight_samples) == 1


def test_mean_weights_needs_one_parsed_sample():
    with pytest.raises(ValueError, match="no weight sample parsed"):
        mean_weights([WeightSample(0, None, unscored_reason="call failed")])
    one = {d: 0.25 for d in DIMENSIONS}
    assert mean_weights([WeightSample(0, one, one), WeightSample(1, None, unscored_reason="x")]) == (one, one, False)


def test_sample_parameters_and_versions_name_the_count():
    assert sample_params(0, 1) == {}
    assert [sample_params(k, 5)["seed"] for k in range(5)] == [0, 1, 2, 3, 4]
    assert weights_version(1) == "race_weights_v1" and weights_version(5) == "race_weights_v1.x5"
    for bad in [(0, 0), (5, 5), (-1, 3)]:
        with pytest.raises(ValueError):
            sample_params(*bad)
    with pytest.raises(ValueError, match="integer >= 1"):
        weights_version(0)


def ctx(judge: str, samples: int):
    return SimpleNamespace(spec=SimpleNamespace(judge=judge), settings=Settings().replace(race_weight_samples=samples))


def test_the_judge_config_and_prompt_versions_name_the_sample_count():
    config, versions = race_rubrics.ARTEFACTS.judge_config, race_rubrics.ARTEFACTS.prompt_versions
    assert config(ctx("openai/gpt-4o", 5)) == "llm:openai/gpt-4o:race_weights_v1.x5+race_criteria_v1"
    assert versions(ctx("openai/gpt-4o", 5)) == {"weights": "race_weights_v1.x5", "criteria": "race_criteria_v1"}
    # One sample: the judge config of rubrics built before sampling, so those are kept, not rebuilt.
    assert config(ctx("openai/gpt-4o", 1)) == "llm:openai/gpt-4o:race_weights_v1+race_criteria_v1"
    # The local judge's one fixed weight set: the count does not apply.
    assert config(ctx("local", 5)) == config(ctx("local", 1)) == "local:all-MiniLM-L6-v2:race_local_v1"


def test_the_setting_defaults_to_five_and_refuses_anything_but_an_integer_of_at_least_one():
    assert Settings.from_env({}).race_weight_samples == 5
    assert Settings.from_env({"DEEPSCHOLAR_RACE_WEIGHT_SAMPLES": "3"}).race_weight_samples == 3
    assert Settings.from_env({"DEEPSCHOLAR_RACE_WEIGHT_SAMPLES": ""}).race_weight_samples == 5
    for raw in ("0", "-2", "2.5", "five"):
        with pytest.raises(InvalidInput, match=rf"DEEPSCHOLAR_RACE_WEIGHT_SAMPLES='{raw}': expected an integer >= 1"):
            Settings.from_env({"DEEPSCHOLAR_RACE_WEIGHT_SAMPLES": raw})
