"""Text becomes a judge one way: `JudgeSpec.parse`, for a judge as `--judge` takes it and a stored config id
alike (no second constructor that treats one of them differently)."""

from __future__ import annotations

import inspect

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.evaluation import judge_spec
from deepscholar.evaluation.judge_spec import LOCAL_JUDGE, JudgeSpec, is_local_config


def test_a_stored_config_id_and_the_judge_text_it_came_from_are_the_same_judge():
    text = "openai/small;output=json_schema;nugget_coverage=openai/big"
    spec = JudgeSpec.parse(text)
    assert spec.config_id == "llm:openai/small;output=json_schema;nugget_coverage=openai/big"
    assert JudgeSpec.parse(spec.config_id) == spec
    assert JudgeSpec.parse("openai/gpt-4o", {"nugget_coverage": "openai/gpt-4.1"}) == JudgeSpec.parse(
        "llm:openai/gpt-4o;nugget_coverage=openai/gpt-4.1")
    local = JudgeSpec.parse("local")
    assert local == LOCAL_JUDGE and local.is_local and JudgeSpec.parse(local.config_id) == local
    assert JudgeSpec.parse("local:another-model:v0") == local  # any local id is the local judge


@pytest.mark.parametrize("bad", ["", "  ", "llm:", "openai/x;output", "openai/x;no_such_metric=openai/y",
                                 "local;output=json_schema", "llm:openai/x;output=grammar"])
def test_a_bad_judge_is_one_clear_refusal(bad):
    with pytest.raises(InvalidInput):
        JudgeSpec.parse(bad)


def test_one_constructor_and_one_predicate():
    constructors = [name for name, value in vars(JudgeSpec).items() if isinstance(value, classmethod)]
    assert constructors == ["parse"]
    functions = {name for name, value in vars(judge_spec).items()
                 if inspect.isfunction(value) and value.__module__ == judge_spec.__name__ and not name.startswith("_")}
    assert functions == {"record_judge_config", "is_local_config"}
    assert is_local_config(LOCAL_JUDGE.config_id) and not is_local_config(JudgeSpec.parse("openai/x").config_id)
