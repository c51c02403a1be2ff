"""A system's build (systems/build.py) names everything that defines its output: the registered version,
the kind's code version, its prompt versions, its models and its output-defining config (defaults
resolved); it ignores where and how the system runs. Prompt files are never edited here: the loader is
monkeypatched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deepscholar.systems import deepscholar_base as base_module
from deepscholar.systems import search_agent as agent_module
from deepscholar.systems.base import SystemContext, system_kinds
from deepscholar.systems.build import SystemBuild, config_hash, import_build
from deepscholar.systems.deepscholar_base import DEFAULTS, DeepScholarBase
from deepscholar.systems.external.importer import format_build
from deepscholar.systems.search_agent import SearchAgent

MODEL = "openai/gpt-4o-mini"


def _bumped(loader, stage: str):
    """A prompt loader that reports `<stage>`'s prompt as v2 (the file itself is untouched)."""
    def load(name: str):
        prompt = loader(name)
        return replace(prompt, version=prompt.version.replace("_v1", "_v2")) if stage in name else prompt
    return load


def test_the_build_string_of_each_llm_kind_names_its_prompts_model_and_config():
    base = DeepScholarBase.effective_version("1", {"model": MODEL})
    cfg = config_hash({**{k: v for k, v in DEFAULTS.items() if k != "concurrency"}, "model": MODEL})
    assert base.label() == (f"deepscholar_base:1+code2+prompts(aggregate_v1,filter_v1,queries_v1,rank_v1)"
                            f"+model({MODEL})+cfg{cfg}")
    assert base.detail()["prompts"] == {stage: f"deepscholar_base_{stage}_v1"
                                        for stage in ("aggregate", "filter", "queries", "rank")}
    assert base.detail()["config"]["K"] == DEFAULTS["K"] and "concurrency" not in base.detail()["config"]
    agent = SearchAgent.effective_version("v2", {"model": MODEL})
    assert agent.label().startswith(f"search_agent:v2+code2+prompts(search_agent_v1,final_v1)+model({MODEL})+cfg")
    assert len(base.config_hash) == 8 and base.config_hash == DeepScholarBase.effective_version(
        "1", {"model": MODEL}).config_hash  # stable


def test_where_and_how_a_system_runs_is_not_part_of_its_build():
    plain = DeepScholarBase.effective_version("1", {"model": MODEL})
    moved = DeepScholarBase.effective_version("1", {"model": MODEL, "api_base": "http://elsewhere:4000",
                                                    "api_key_env": "OTHER_KEY", "timeout": 5, "concurrency": 2})
    assert moved == plain


@pytest.mark.parametrize(("change", "part"), [
    ({"K": 10}, "+cfg"),  # an output-defining setting
    ({"model": "anthropic/claude-3-5-haiku"}, "+model(anthropic/claude-3-5-haiku)+"),
])
def test_an_output_defining_config_change_changes_the_build(change, part):
    before = DeepScholarBase.effective_version("1", {"model": MODEL}).label()
    after = DeepScholarBase.effective_version("1", {"model": MODEL, **change}).label()
    assert after != before and part in after


def test_a_changed_default_changes_the_build_though_the_stored_config_is_the_same(monkeypatch):
    before = DeepScholarBase.effective_version("1", {"model": MODEL})
    monkeypatch.setattr(DeepScholarBase, "defaults", {**DEFAULTS, "K": 20})
    after = DeepScholarBase.effective_version("1", {"model": MODEL})
    assert after.config_hash != before.config_hash and after.config["K"] == 20


def test_a_new_prompt_version_changes_the_build_and_is_what_the_system_uses(monkeypatch):
    before = DeepScholarBase.effective_version("1", {"model": MODEL}).label()
    monkeypatch.setattr(base_module, "load_system_prompt", _bumped(base_module.load_system_prompt, "rank"))
    after = DeepScholarBase.effective_version("1", {"model": MODEL}).label()
    assert after == before.replace("rank_v1", "rank_v2")
    system = DeepScholarBase("s", {"model": MODEL}, SystemContext(engine=None))  # type: ignore[arg-type]
    assert system.prompts["rank"].version == "deepscholar_base_rank_v2"

    monkeypatch.setattr(agent_module, "load_system_prompt", _bumped(agent_module.load_system_prompt, "final"))
    assert "+prompts(search_agent_v1,final_v2)+" in SearchAgent.effective_version("1", {"model": MODEL}).label()
    assert SearchAgent("s", {"model": MODEL}, SystemContext(engine=None)).final_prompt.version == (  # type: ignore[arg-type]
        "search_agent_final_v2")


def test_a_code_version_bump_changes_the_build(monkeypatch):
    monkeypatch.setattr(DeepScholarBase, "version", "2")
    assert "+code2+" in DeepScholarBase.effective_version("1", {"model": MODEL}).label()


def test_every_kind_states_a_build_without_being_constructed():
    """A bad config fails construction (stored as system_error); the build of that report is still known."""
    labels = {kind: cls.effective_version("1", {}).label() for kind, cls in system_kinds().items()}
    assert labels["deepscholar_base"].startswith("deepscholar_base:1+code2+prompts(")  # no model: none named
    assert labels["extractive"].startswith("extractive:1+code2+model(all-MiniLM-L6-v2)+cfg")
    assert labels["human_exemplar"] == f"human_exemplar:1+code1+cfg{config_hash({})}"
    assert labels["oracle"] == f"oracle:1+code1+cfg{config_hash({'respect_cutoff': True})}"
    assert labels["external"] == f"external:1+code1+cfg{config_hash({})}"  # an endpoint is a location


def test_an_imported_report_names_the_format_that_read_it():
    assert format_build("1", "storm").label() == "external:1+import(storm@1)"
    assert format_build("1", "storm").detail() == {
        "kind": "external", "registered_version": "1", "import": {"format": "storm", "format_version": "1"}}
    assert format_build("1", "no-such-format").label() == "external:1+import(no-such-format@?)"
    assert import_build("3", "jsonl", "2") == SystemBuild(kind="external", version="3", import_format="jsonl",
                                                          import_format_version="2")


# --- the search backend ------------------------------------------------------------------------------------

@pytest.fixture
def default_backend(monkeypatch):
    monkeypatch.delenv("DEEPSCHOLAR_SEARCH_BACKEND", raising=False)


def test_the_search_backend_is_part_of_the_build_of_a_kind_that_searches(default_backend, monkeypatch):
    local = DeepScholarBase.effective_version("1", {"model": MODEL})
    assert local.search == "local" and local.detail()["search_backend"] == "local"
    # The registry's default is implied, so builds stored before the backend was recorded keep their string.
    assert "+search(" not in local.label()

    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_BACKEND", "arxiv")
    arxiv = DeepScholarBase.effective_version("1", {"model": MODEL})
    assert arxiv != local and arxiv.label() != local.label()
    assert arxiv.label() == local.label().replace("+cfg", "+search(arxiv)+cfg")
    assert arxiv.detail() == {**local.detail(), "search_backend": "arxiv"}
    assert "+search(arxiv)+" in SearchAgent.effective_version("1", {"model": MODEL}).label()
    assert "+search(arxiv)+" in system_kinds()["extractive"].effective_version("1", {}).label()


def test_a_backend_the_config_names_is_the_one_used_whatever_the_environment(default_backend, monkeypatch):
    named = DeepScholarBase.effective_version("1", {"model": MODEL, "search": "arxiv"})
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_BACKEND", "local")
    assert DeepScholarBase.effective_version("1", {"model": MODEL, "search": "arxiv"}) == named
    assert named.search == "arxiv" and named.detail()["search_backend"] == "arxiv"
    # Already in the config hash: named once.
    assert "+search(" not in named.label()
    assert named.config_hash != DeepScholarBase.effective_version("1", {"model": MODEL}).config_hash
    # Written the way make_search reads it (case and blanks do not make another backend).
    assert DeepScholarBase.effective_version("1", {"model": MODEL, "search": " ArXiv "}).search == "arxiv"


def test_kinds_without_search_have_no_backend_in_their_build(default_backend, monkeypatch):
    before = {kind: cls.effective_version("1", {}) for kind, cls in system_kinds().items()
              if not cls.uses_search}
    assert set(before) >= {"external", "human_exemplar", "oracle"}
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_BACKEND", "arxiv")
    for kind, build in before.items():
        after = system_kinds()[kind].effective_version("1", {})
        assert after == build and build.search is None and "search_backend" not in build.detail()
        assert "+search(" not in after.label()
