"""Every stored report records its system's build; a month whose ok reports of one system carry two builds
fails the reports check naming the system and the builds; generation never rewrites an outdated report by
itself, only `regenerate_outdated` (the CLI's `generate --regenerate-outdated`) does."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.errors import InvalidInput
from deepscholar.prompts import Prompt
from deepscholar.systems.base import Report, Source, System, registered_system
from deepscholar.systems.build import config_hash
from deepscholar.systems.external import formats, importer
from deepscholar.systems.external.importer import import_reports
from deepscholar.systems.generation import current_build, generate_release, plan_pairs, regenerate_outdated
from deepscholar.systems.quality import UNKNOWN_BUILD, run_reports_check
from deepscholar.systems.registry import add_system, get_system

RELEASE = "2025-06"
CUTOFF = datetime(2025, 6, 10, tzinfo=UTC)
QUERIES = [f"2506.0000{i}" for i in range(3)]
KIND = "test_build_prompted"
PROMPT_VERSION = {"write": f"{KIND}_write_v1"}


class Prompted(System):
    """An offline system with a (pretend) prompt file and a default: what a build is made of."""

    kind = KIND
    uses_search = False
    defaults = {"style": "plain"}

    @classmethod
    def load_prompts(cls):
        return {"write": Prompt(name="write", version=PROMPT_VERSION["write"], template="{{title}}\n")}

    def generate(self, query, search=None):
        return Report(text=f"{query.title} builds on earlier work [1].\n",
                      sources=[Source(idx=1, title="Earlier work", snippet="We did it.", arxiv_id="2401.00001")])


@pytest.fixture
def prompted(monkeypatch):
    monkeypatch.setitem(PROMPT_VERSION, "write", f"{KIND}_write_v1")
    with registered_system(Prompted):
        yield Prompted


@pytest.fixture
def month(engine):
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [
            {"release_id": RELEASE, "arxiv_id": a, "title": f"Study {i}", "abstract": "We study.", "published": CUTOFF,
             "section_raw_latex": "x", "section_text": "x", "word_count": 1} for i, a in enumerate(QUERIES)],
            key=["release_id", "arxiv_id"])
    return engine


def builds(engine, system_id: str) -> dict[str, tuple[str | None, dict | None]]:
    with engine.connect() as conn:
        return {r.arxiv_id: (r.system_build, r.system_build_detail) for r in conn.execute(sa.text(
            "SELECT arxiv_id, system_build, system_build_detail FROM reports WHERE system_id = :s"),
            {"s": system_id})}


def test_generated_reports_store_their_build_and_one_build_passes_the_check(month, prompted):
    add_system(month, "mine", KIND, {"api_base": "http://where.it.runs:4000"})
    assert generate_release(month, RELEASE) == {"pairs": 3, "ok": 3}
    label = f"{KIND}:1+code1+prompts(write_v1)+cfg{config_hash({'style': 'plain'})}"
    detail = {"kind": KIND, "registered_version": "1", "code_version": "1",
              "prompts": {"write": f"{KIND}_write_v1"}, "models": [], "config": {"style": "plain"},
              "config_hash": config_hash({"style": "plain"})}
    assert builds(month, "mine") == dict.fromkeys(QUERIES, (label, detail))
    assert current_build(get_system(month, "mine")) == label
    result = run_reports_check(month, RELEASE)
    assert result.success, result.summary
    assert "one_build_per_system" in [c["name"] for c in result.checks]


def _new_prompt_version_midway(engine) -> tuple[str, str]:
    """Two reports written, then the prompt moves to v2 and the third is written: a mixed month."""
    add_system(engine, "mine", KIND)
    with engine.begin() as conn:  # the third query's report is still to be written
        conn.execute(sa.text("DELETE FROM reports WHERE system_id = 'mine' AND arxiv_id = :a"), {"a": QUERIES[2]})
    old = current_build(get_system(engine, "mine"))
    PROMPT_VERSION["write"] = f"{KIND}_write_v2"
    assert plan_pairs(engine, RELEASE) == [  # only the missing pair: an outdated report is not missing
        {"release_id": RELEASE, "system_id": "mine", "arxiv_id": QUERIES[2], "lane": "offline"}]
    generate_release(engine, RELEASE)
    new = current_build(get_system(engine, "mine"))
    assert new == old.replace("write_v1", "write_v2")
    return old, new


def test_two_builds_of_one_system_in_a_month_fail_the_check_naming_both(month, prompted):
    add_system(month, "steady", "human_exemplar")
    add_system(month, "mine", KIND)
    generate_release(month, RELEASE)
    old, new = _new_prompt_version_midway(month)
    assert sorted(b for b, _ in builds(month, "mine").values()) == [old, old, new]

    result = run_reports_check(month, RELEASE)
    assert not result.success
    assert result.failed_checks == ["one_build_per_system"]
    [check] = [c for c in result.checks if c["name"] == "one_build_per_system"]
    assert check["details"]["unexpected_rows"] == [{"system_id": "mine", "n_builds": 2}]
    assert f"system mine's 3 ok reports of {RELEASE} mix builds: {old} (2 reports); {new} (1 reports)" in (
        result.summary)
    assert f"deepscholar reports generate --release {RELEASE} --system mine --regenerate-outdated" in result.summary
    assert "steady" not in result.summary

    # Only on request: the two outdated reports (and their scores) go, and are written again.
    scores = "SELECT count(*) FROM metric_scores"
    with month.begin() as conn:
        conn.execute(sa.text("INSERT INTO metric_scores (report_id, metric, judge_config, variant, metric_version, "
                             "value) SELECT report_id, 'relevance_rate', 'local:m:v1', 'default', 'v1', 1.0 "
                             "FROM reports WHERE system_id IN ('mine', 'steady')"))
        assert conn.execute(sa.text(scores)).scalar() == 6
    summary = regenerate_outdated(month, RELEASE, ["mine"])
    assert summary == {"deleted_outdated": 2, "pairs": 2, "ok": 2}
    with month.connect() as conn:
        assert conn.execute(sa.text(scores)).scalar() == 4  # the outdated reports' scores went with them
    assert sorted(b for b, _ in builds(month, "mine").values()) == [new] * 3
    assert run_reports_check(month, RELEASE).success


def test_an_operator_moving_a_system_to_another_endpoint_or_key_makes_a_new_build(month, prompted):
    """Issue 32 §1: where a system runs and with whose key is part of what wrote its reports. A timeout is not."""
    add_system(month, "mine", KIND, {"api_base": "http://where.it.runs:4000"})
    generate_release(month, RELEASE)
    first = current_build(get_system(month, "mine"))
    assert "endpoint" not in first  # a system never moved keeps the string it always had
    assert add_system(month, "mine", KIND, {"api_base": "http://where.it.runs:4000", "timeout": 90}) == "updated"
    assert current_build(get_system(month, "mine")) == first

    assert add_system(month, "mine", KIND, {"api_base": "http://elsewhere:4000", "timeout": 90}) == "moved"
    moved = current_build(get_system(month, "mine"))
    assert moved == first.replace("+cfg", "+endpoint1+cfg")
    with month.begin() as conn:
        conn.execute(sa.text("DELETE FROM reports WHERE system_id = 'mine' AND arxiv_id = :a"), {"a": QUERIES[2]})
    generate_release(month, RELEASE)
    assert sorted(b for b, _ in builds(month, "mine").values()) == sorted([first, first, moved])
    assert builds(month, "mine")[QUERIES[2]][1]["endpoint_revision"] == 1
    result = run_reports_check(month, RELEASE)
    assert result.failed_checks == ["one_build_per_system"], result.summary
    assert first in result.summary and moved in result.summary

    # The key it sends is part of it too; giving the same endpoint again changes nothing.
    keyed = {"api_base": "http://elsewhere:4000", "timeout": 90, "api_key_env": "OPENAI_API_KEY"}
    assert add_system(month, "mine", KIND, keyed) == "moved"
    assert add_system(month, "mine", KIND, keyed) == "unchanged"
    assert get_system(month, "mine")["endpoint_revision"] == 2
    assert current_build(get_system(month, "mine")) == first.replace("+cfg", "+endpoint2+cfg")


def test_reports_from_before_builds_are_one_unknown_build(month, prompted):
    add_system(month, "mine", KIND)
    generate_release(month, RELEASE)
    with month.begin() as conn:  # as a warehouse upgraded to 0010 has them
        conn.execute(sa.text("UPDATE reports SET system_build = NULL, system_build_detail = NULL"))
    assert run_reports_check(month, RELEASE).success  # all unknown: one build, not a mix

    with month.begin() as conn:
        conn.execute(sa.text("DELETE FROM reports WHERE arxiv_id = :a"), {"a": QUERIES[0]})
    generate_release(month, RELEASE)  # one report with a build beside two without
    result = run_reports_check(month, RELEASE)
    assert not result.success
    assert f"{UNKNOWN_BUILD} (2 reports)" in result.summary
    assert current_build(get_system(month, "mine")) in result.summary


def test_regenerating_needs_named_runnable_systems(month, prompted, tmp_path):
    with pytest.raises(InvalidInput, match="name the systems"):
        regenerate_outdated(month, RELEASE, [])
    add_system(month, "imported", "external", {"source": str(tmp_path), "format": "jsonl"})
    with pytest.raises(InvalidInput, match="is file-imported: re-import its outputs"):
        regenerate_outdated(month, RELEASE, ["imported"])


def _jsonl(path, arxiv_ids):
    path.write_text("".join(json.dumps({"arxiv_id": a, "text": "Earlier work [1].", "sources": [
        {"idx": 1, "arxiv_id": "2401.00001", "title": "Earlier work", "snippet": "We did it."}]}) + "\n"
        for a in arxiv_ids))
    return path


def test_imported_reports_record_the_format_and_its_version(month, monkeypatch, tmp_path):
    summary = import_reports(month, "elsewhere", _jsonl(tmp_path / "a.jsonl", QUERIES), RELEASE,
                             title_search="corpus")
    assert summary.n_stored == 3
    detail = {"kind": "external", "registered_version": "1", "import": {"format": "jsonl", "format_version": "1"}}
    assert builds(month, "elsewhere") == dict.fromkeys(QUERIES, ("external:1+import(jsonl@1)", detail))
    assert current_build(get_system(month, "elsewhere")) == "external:1+import(jsonl@1)"
    assert run_reports_check(month, RELEASE).success

    # One output read by another format (a markdown file) is not a mix: each reader has one build.
    (tmp_path / "md" / QUERIES[2]).mkdir(parents=True)
    (tmp_path / "md" / QUERIES[2] / "report.md").write_text(
        "Earlier work [1].\n\n## References\n\n[1] Earlier work. arXiv:2401.00001\n")
    assert import_reports(month, "elsewhere", tmp_path / "md", RELEASE, title_search="corpus").n_stored == 1
    assert builds(month, "elsewhere")[QUERIES[2]][0] == "external:1+import(markdown@1)"
    result = run_reports_check(month, RELEASE)
    assert result.success, result.summary

    # The jsonl reader changes its reading (version 2) and one output is imported again: a mix.
    jsonl_v2 = replace(formats.get("jsonl"), version="2")
    monkeypatch.setattr(importer, "get_format", lambda name: jsonl_v2 if name == "jsonl" else formats.get(name))
    import_reports(month, "elsewhere", _jsonl(tmp_path / "b.jsonl", QUERIES[:1]), RELEASE, title_search="corpus")
    assert builds(month, "elsewhere")[QUERIES[0]][0] == "external:1+import(jsonl@2)"
    result = run_reports_check(month, RELEASE)
    assert not result.success
    assert ("external:1+import(jsonl@1) (1 reports); external:1+import(jsonl@2) (1 reports); "
            "external:1+import(markdown@1) (1 reports)") in result.summary
    assert f"deepscholar reports import elsewhere PATH --release {RELEASE}" in result.summary


def _score_counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("""
            SELECT r.arxiv_id, count(m.report_id) FROM reports r
            LEFT JOIN metric_scores m USING (report_id) WHERE r.system_id = 'elsewhere' GROUP BY 1""")).all())


def test_a_report_stored_again_with_other_content_loses_its_old_scores_and_the_same_content_keeps_them(
        month, tmp_path):
    import_reports(month, "elsewhere", _jsonl(tmp_path / "a.jsonl", QUERIES), RELEASE, title_search="corpus")
    with month.begin() as conn:
        conn.execute(sa.text("""
            INSERT INTO judgments (report_id, metric, judge_config, item_key, metric_version, label)
            SELECT report_id, 'organization', 'local:m:v1', 'report', 'v1', '1' FROM reports"""))
        conn.execute(sa.text("""
            INSERT INTO metric_scores (report_id, metric, judge_config, variant, metric_version, value)
            SELECT report_id, 'organization', 'local:m:v1', 'default', 'v1', 1.0 FROM reports"""))
    # The same file again (a re-run): judging stays free.
    import_reports(month, "elsewhere", _jsonl(tmp_path / "a.jsonl", QUERIES), RELEASE, title_search="corpus")
    assert _score_counts(month) == dict.fromkeys(QUERIES, 1)

    # A corrected output for one query: its old scores would describe text it no longer has.
    corrected = tmp_path / "b.jsonl"
    corrected.write_text(json.dumps({"arxiv_id": QUERIES[1], "text": "Earlier work, corrected [1].", "sources": [
        {"idx": 1, "arxiv_id": "2401.00001", "title": "Earlier work", "snippet": "We did it."}]}) + "\n")
    import_reports(month, "elsewhere", corrected, RELEASE, title_search="corpus")
    assert _score_counts(month) == {QUERIES[0]: 1, QUERIES[1]: 0, QUERIES[2]: 1}
    with month.connect() as conn:
        assert conn.execute(sa.text("""SELECT count(*) FROM judgments j JOIN reports r USING (report_id)
                                       WHERE r.arxiv_id = :a"""), {"a": QUERIES[1]}).scalar() == 0


# --- the search backend is part of the build --------------------------------------------------------------

SEARCHING_KIND = "test_build_searching"


class Searching(System):
    """An offline system that asks its search tool: which backend answered is part of what it wrote."""

    kind = SEARCHING_KIND
    uses_search = True

    def generate(self, query, search):
        hits = search.search(query.title, k=1)
        return Report(text=f"{query.title} builds on earlier work [1] ({search.name}, {len(hits)} hits).\n",
                      sources=[Source(idx=1, title="Earlier work", snippet="We did it.", arxiv_id="2401.00001")])


class _Empty:
    name = "test_other"

    def __init__(self, cutoff):
        self.cutoff = cutoff

    def search(self, text, k=10):
        return []


@pytest.fixture
def searching(monkeypatch):
    from deepscholar.search import registry as search_registry
    from deepscholar.search.base import Backend

    monkeypatch.delenv("DEEPSCHOLAR_SEARCH_BACKEND", raising=False)
    other = Backend("test_other", lambda engine, cutoff, exclude_ids, **kw: _Empty(cutoff))
    with registered_system(Searching), search_registry.registered(other):
        yield Searching


def backends(engine, system_id: str) -> dict[str, str]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT arxiv_id, search_backend FROM reports WHERE system_id = :s"),
                                 {"s": system_id}).all())


def test_a_month_mixing_search_backends_for_one_system_fails_the_check(month, searching, monkeypatch):
    add_system(month, "finder", SEARCHING_KIND)
    add_system(month, "pinned", SEARCHING_KIND, {"search": "local"})  # names its backend: never mixed
    assert generate_release(month, RELEASE) == {"pairs": 6, "ok": 6}
    local = current_build(get_system(month, "finder"))
    assert "+search(" not in local  # the default backend: the string builds had before it was recorded
    assert {b for b, _ in builds(month, "finder").values()} == {local}
    assert {d["search_backend"] for _, d in builds(month, "finder").values()} == {"local"}
    assert run_reports_check(month, RELEASE).success

    # One report is written again by a process whose default backend is another one.
    with month.begin() as conn:
        conn.execute(sa.text("DELETE FROM reports WHERE arxiv_id = :a"), {"a": QUERIES[2]})
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_BACKEND", "test_other")
    assert generate_release(month, RELEASE) == {"pairs": 2, "ok": 2}
    other = current_build(get_system(month, "finder"))
    assert other == local.replace("+cfg", "+search(test_other)+cfg")
    assert backends(month, "finder") == {QUERIES[0]: "local", QUERIES[1]: "local", QUERIES[2]: "test_other"}
    assert builds(month, "finder")[QUERIES[2]][1]["search_backend"] == "test_other"

    result = run_reports_check(month, RELEASE)
    assert not result.success and result.failed_checks == ["one_build_per_system"]
    assert f"system finder's 3 ok reports of {RELEASE} mix builds: {local} (2 reports); {other} (1 reports)" in (
        result.summary)
    assert "pinned" not in result.summary  # its config names the backend: the environment changed nothing

    # Regenerating under the new backend makes the month one build again.
    assert regenerate_outdated(month, RELEASE, ["finder"]) == {"deleted_outdated": 2, "pairs": 2, "ok": 2}
    assert set(backends(month, "finder").values()) == {"test_other"}
    assert run_reports_check(month, RELEASE).success
