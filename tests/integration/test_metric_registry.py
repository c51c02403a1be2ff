"""The metric registry: a metric declared in one place (here, this test module) is judged, rolled up and
shown everywhere — CLI table and JSON, the page, the SQL views — with no other file changed.

The throwaway metric, *sentence density*, counts the report body's sentences: the local judge answers
from the text, an LLM judge would be asked the same through the client. It joins the "verifiability"
dimension after the core two and leaves again when its `registered()` block ends.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import httpx
import pytest
import sqlalchemy as sa
from support.chromium import serve
from support.demo_month import served_demo_month

from deepscholar.errors import InvalidInput
from deepscholar.evaluation import registry
from deepscholar.evaluation.base import (
    Item,
    ItemJudgment,
    ReportContext,
    Score,
    compose_version,
    report_unscored,
)
from deepscholar.evaluation.leaderboard import format_leaderboard, load_leaderboard
from deepscholar.evaluation.rollup import roll_up
from deepscholar.evaluation.runner import evaluate_release
from deepscholar.web import create_app

pytestmark = pytest.mark.slow  # builds and judges the demo month

CORE = ("organization", "nugget_coverage", "relevance_rate", "reference_coverage", "document_importance",
        "citation_precision", "claim_coverage")


class SentenceDensity:
    """Sentences in the report body per 10, capped at 1: a metric small enough to read in one screen."""

    name = "sentence_density"
    dimension = "verifiability"
    position = 3
    label = "Sent dens"
    headline = "score"
    variants = ("score", "per_20")

    @property
    def version(self) -> str:
        return compose_version("d1")

    def items(self, report: ReportContext) -> list[Item]:
        return [Item("body")]

    def judge_llm(self, client, report: ReportContext, item: Item) -> ItemJudgment:
        raise AssertionError("this test judges locally")

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        return [ItemJudgment(item.key, {"sentences": len(report.sentences)}, explanation="counted")
                for item in items]

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        failed = report_unscored(self.variants, judgments)
        if failed:
            return failed
        n = judgments[0].label["sentences"]
        return [Score("score", min(1.0, n / 10), n_items=1), Score("per_20", min(1.0, n / 20), n_items=1)]


METRIC = SentenceDensity()


def test_the_core_seven_are_discovered_in_table_2_order():
    assert registry.metric_names(registry.CORE) == CORE
    assert registry.dimensions(registry.CORE) == {"knowledge_synthesis": CORE[:2], "retrieval_quality": CORE[2:5],
                                     "verifiability": CORE[5:]}
    assert [registry.metric_label(m) for m in CORE] == [
        "Org", "Nugget cov", "Rel rate", "Ref cov", "Doc imp", "Cite-P", "Claim cov (w=1)"]
    assert registry.headline_variant("nugget_coverage") == "strict_all"


@pytest.mark.parametrize("change,error", [
    ({"name": "organization"}, "already registered"),
    ({"name": "Bad Name"}, "lower_snake_case"),
    ({"dimension": "vibes"}, "unknown dimension 'vibes'"),
    ({"headline": "nope"}, "headline 'nope' is not one of its variants"),
    ({"label": " "}, "label"),
])
def test_a_malformed_or_clashing_metric_is_refused_loudly(change, error):
    bad = SentenceDensity()
    for key, value in change.items():
        setattr(bad, key, value)
    with pytest.raises(InvalidInput, match=error):
        registry.register(bad)
    assert registry.metric_names(registry.CORE) == CORE


def test_an_unknown_metric_name_lists_the_known_ones():
    with pytest.raises(InvalidInput, match="unknown metric 'organisation'; known: organization, nugget_coverage"):
        registry.get("organisation")


@pytest.fixture(scope="module")
def demo(db_url):
    with served_demo_month(db_url, "deepscholar_registry_") as month:
        yield month


def _view_columns(engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'deepscholar' "
            "AND table_name = 'leaderboard' ORDER BY ordinal_position")).scalars())


def test_a_metric_declared_in_one_file_is_judged_rolled_up_and_shown_everywhere(demo):
    engine, month = demo["engine"], demo["month"]
    judged = ["reference_coverage", "sentence_density"]
    with registry.registered(METRIC):
        assert registry.metric_names(registry.CORE) == (*CORE, "sentence_density")
        result = evaluate_release(engine, month, judge="local", metrics=judged)
        judge_config = result["judge_config"]
        with engine.connect() as conn:
            scores = conn.execute(sa.text(
                "SELECT m.variant, count(*) AS n, count(m.value) AS scored FROM metric_scores m "
                "JOIN reports r USING (report_id) WHERE r.release_id = :r AND m.metric = 'sentence_density' "
                "GROUP BY m.variant ORDER BY m.variant"), {"r": month}).all()
            ok_reports = conn.execute(sa.text(
                "SELECT count(*) FROM reports WHERE release_id = :r AND status = 'ok'"), {"r": month}).scalar()
        assert [tuple(s) for s in scores] == [("per_20", ok_reports, ok_reports), ("score", ok_reports, ok_reports)]

        rows = load_leaderboard(engine, month, judge_config)
        assert rows and all(r["metrics"]["sentence_density"]["n"] > 0 for r in rows)
        assert list(rows[0]["metrics"])[-3:] == ["citation_precision", "claim_coverage", "sentence_density"]
        table = format_leaderboard(rows, "table")
        assert "Sent dens" in table.splitlines()[3]  # the column heading row, under "Verifiability"
        as_json = json.loads(format_leaderboard(rows, "json"))
        assert as_json[0]["metrics"]["sentence_density"]["dimension"] == "verifiability"
        assert "sentence_density_n" in format_leaderboard(rows, "csv").splitlines()[0]
        # SQL: the wide views grew a column, with the same means as leaderboard_metrics.
        assert _view_columns(engine).count("sentence_density") == 1
        with engine.connect() as conn:
            wide = dict(conn.execute(sa.text(
                "SELECT system_id, sentence_density FROM leaderboard WHERE release_id = :r AND judge_config = :j"),
                {"r": month, "j": judge_config}).all())
        assert wide == {r["system_id"]: pytest.approx(r["metrics"]["sentence_density"]["mean"]) for r in rows}
        with serve(create_app(lambda: engine)) as url:
            page = httpx.get(f"{url}/", params={"release": month, "judge_config": judge_config}, timeout=30)
        assert page.status_code == 200
        assert 'data-metric="sentence_density"' in page.text and "Sent dens" in page.text

    # Gone from the registry: the next roll-up drops it from the board and the views.
    assert registry.metric_names(registry.CORE) == CORE
    roll_up(engine, month, judge_config, n_boot=50)
    assert "sentence_density" not in _view_columns(engine)
    assert "sentence_density" not in load_leaderboard(engine, month, judge_config)[0]["metrics"]


class ScratchDensity(SentenceDensity):
    """The same throwaway metric in a family of its own: an evaluation track, not a core metric."""

    name = "scratch_density"
    dimension = "scratch_depth"
    position = 1
    label = "Scratch dens"


SCRATCH = registry.Family("scratch", "Scratch track", 90)
SCRATCH_DIMENSIONS = [registry.Dimension("scratch_depth", "Scratch depth", "scratch", 1)]


def test_a_metric_of_another_family_is_judged_only_when_its_track_is_on_and_never_moves_the_core_board(
        demo, monkeypatch):
    from deepscholar.evaluation.jobs import plan_units

    engine, month = demo["engine"], demo["month"]
    judge_config = evaluate_release(engine, month, judge="local", metrics=["reference_coverage"])["judge_config"]
    before = load_leaderboard(engine, month, judge_config)
    columns = _view_columns(engine)
    with registry.registered_family(SCRATCH, SCRATCH_DIMENSIONS), registry.registered(ScratchDensity()):
        assert registry.metric_names("scratch") == ("scratch_density",)
        assert registry.metric_names(registry.CORE) == CORE and registry.tracks() == ("reportbench", "scratch")
        # Judged by default only with its track enabled; an unknown track is refused by name.
        monkeypatch.delenv("DEEPSCHOLAR_TRACKS", raising=False)
        assert {u["metric"] for u in plan_units(engine, month, judge="local")} == set(CORE)
        monkeypatch.setenv("DEEPSCHOLAR_TRACKS", "scratch")
        assert "scratch_density" in {u["metric"] for u in plan_units(engine, month, judge="local")}
        monkeypatch.setenv("DEEPSCHOLAR_TRACKS", "scratch,vibes")
        with pytest.raises(InvalidInput, match="unknown evaluation tracks: vibes; known: reportbench, scratch"):
            plan_units(engine, month, judge="local")
        monkeypatch.delenv("DEEPSCHOLAR_TRACKS")

        evaluate_release(engine, month, judge="local", metrics=["scratch_density"])
        with engine.connect() as conn:
            stored = conn.execute(sa.text(
                "SELECT count(*) FROM metric_scores m JOIN reports r USING (report_id) "
                "WHERE r.release_id = :r AND m.metric = 'scratch_density' AND m.judge_config = :j"),
                {"r": month, "j": judge_config}).scalar()
        assert stored > 0
        # The core board, its geometric means, its SQL views and the page are the core family's alone.
        after = load_leaderboard(engine, month, judge_config)
        assert [(r["system_id"], r["rank"], r["geometric_mean"], list(r["metrics"])) for r in after] == [
            (r["system_id"], r["rank"], r["geometric_mean"], list(r["metrics"])) for r in before]
        assert "scratch_density" not in format_leaderboard(after, "csv").splitlines()[0]
        assert _view_columns(engine) == columns
        with serve(create_app(lambda: engine)) as url:
            page = httpx.get(f"{url}/", params={"release": month, "judge_config": judge_config}, timeout=30)
        assert page.status_code == 200 and "scratch_density" not in page.text
    assert registry.tracks() == ("reportbench",) and registry.metric_names(registry.CORE) == CORE


def test_the_reportbench_bibliography_metrics_judge_a_real_month_beside_an_unchanged_core(demo, monkeypatch):
    """The track's two judge-free metrics, enabled with `deepscholar evaluate --tracks`, over the demo month's
    stored reports (exemplar bibliographies with DOIs and cited-by counts read from the warehouse)."""
    import os
    import subprocess
    import sys

    engine, month = demo["engine"], demo["month"]
    monkeypatch.delenv("DEEPSCHOLAR_TRACKS", raising=False)
    judge_config = evaluate_release(engine, month, judge="local")["judge_config"]  # the core, all of it
    before = load_leaderboard(engine, month, judge_config)

    def cli(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   DEEPSCHOLAR_DB_URL=engine.url.render_as_string(hide_password=False))
        return subprocess.run([sys.executable, "-m", "deepscholar.cli", "evaluate", "--release", month,
                               "--judge", "local", *args], capture_output=True, text=True, env=env, timeout=300)

    refused = cli("--tracks", "reportbench", "vibes")
    assert refused.returncode == 2 and "unknown evaluation tracks: vibes; known: reportbench" in refused.stderr
    done = cli("--tracks", "reportbench", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    # Only the track's metrics had anything left to judge.
    assert {r["metric"] for r in result["runs"] if r["reports"]} == {"reference_recall", "reference_precision"}
    assert result["llm_requests"] == 0
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT s.kind, m.metric, m.value, m.unscored_reason FROM metric_scores m
            JOIN reports r USING (report_id) JOIN systems s USING (system_id)
            WHERE r.release_id = :r AND m.judge_config = :j AND m.variant = 'score'
              AND m.metric IN ('reference_recall', 'reference_precision')"""),
            {"r": month, "j": judge_config}).all()
        ok_reports = conn.execute(sa.text(
            "SELECT count(*) FROM reports WHERE release_id = :r AND status = 'ok'"), {"r": month}).scalar()
    assert len(rows) == 2 * ok_reports
    assert all((value is None) == (reason is not None) for _, _, value, reason in rows)
    assert all(value == 1.0 for kind, _, value, _ in rows if kind == "human_exemplar")
    others = [value for kind, _, value, _ in rows if kind != "human_exemplar" and value is not None]
    assert others and all(0.0 <= v <= 1.0 for v in others) and len(set(others)) > 1
    after = load_leaderboard(engine, month, judge_config)
    assert [(r["system_id"], r["geometric_mean"], list(r["metrics"])) for r in after] == [
        (r["system_id"], r["geometric_mean"], list(r["metrics"])) for r in before]
