"""The release-time judge's requests in flight come from DEEPSCHOLAR_RELEASE_JUDGE_CONCURRENCY (default 8),
through the same factory the release's `importance` and `nuggets` steps use (release/labelling.py)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from deepscholar.errors import InvalidInput
from deepscholar.release import labelling
from deepscholar.release.context import ReleaseContext
from deepscholar.release.judging import LLMReleaseJudge, LocalReleaseJudge, make_release_judge
from deepscholar.release.spec import ReleaseSpec
from deepscholar.settings import Settings, current_settings

VARIABLE = "DEEPSCHOLAR_RELEASE_JUDGE_CONCURRENCY"


@pytest.fixture
def engine():
    # The LLM client only keeps the engine for its call cache; nothing here connects.
    engine = sa.create_engine("sqlite://")
    yield engine
    engine.dispose()


def _context(engine, judge: str = "openai/gpt-4.1") -> ReleaseContext:
    return ReleaseContext(engine, "2025-06", ReleaseSpec(judge=judge), current_settings())


def test_the_default_is_eight(engine, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    assert Settings().release_judge_concurrency == 8
    judge = labelling._judge(_context(engine))
    assert isinstance(judge, LLMReleaseJudge) and judge.client.concurrency == 8


def test_the_setting_reaches_the_release_judges_client(engine, monkeypatch):
    monkeypatch.setenv(VARIABLE, "3")
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_API_BASE", "http://judge.example:4000/v1")
    judge = labelling._judge(_context(engine))
    assert isinstance(judge, LLMReleaseJudge)
    assert judge.client.concurrency == 3
    assert judge.client.api_base == "http://judge.example:4000/v1"
    # The benchmark judge's setting is another one.
    assert current_settings().judge_concurrency == 16


def test_the_context_settings_win_over_the_environment(engine, monkeypatch):
    monkeypatch.setenv(VARIABLE, "3")
    ctx = ReleaseContext(engine, "2025-06", ReleaseSpec(judge="openai/gpt-4.1"),
                         current_settings().replace(release_judge_concurrency=5))
    assert labelling._judge(ctx).client.concurrency == 5  # type: ignore[union-attr]


def test_the_factory_alone_reads_the_setting_and_an_explicit_value_wins(engine, monkeypatch):
    monkeypatch.setenv(VARIABLE, "12")
    judge = make_release_judge("openai/gpt-4.1", engine)
    assert isinstance(judge, LLMReleaseJudge) and judge.client.concurrency == 12
    explicit = make_release_judge("openai/gpt-4.1", engine, concurrency=2)
    assert isinstance(explicit, LLMReleaseJudge) and explicit.client.concurrency == 2


def test_the_local_judge_has_no_client(engine, monkeypatch):
    monkeypatch.setenv(VARIABLE, "3")
    assert isinstance(labelling._judge(_context(engine, "local")), LocalReleaseJudge)


@pytest.mark.parametrize("raw", ["0", "-1", "many"])
def test_a_bad_value_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv(VARIABLE, raw)
    with pytest.raises(InvalidInput, match=VARIABLE):
        current_settings()
