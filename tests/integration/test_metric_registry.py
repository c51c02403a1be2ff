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
from support.chromium import parse_html, serve
from support.demo_month import served_demo_month

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard
from deepscholar.evaluation.boards.rollup import roll_up
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import (
    Item,
    ItemJudgment,
    ReportContext,
    Score,
    compose_version,
    report_unscored,
)
from deepscholar.evaluation.pipeline import evaluate_release
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
def demo(demo_template):
    with served_demo_month(demo_template, "deepscholar_registry_") as month:
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
    from deepscholar.evaluation.judging.jobs import plan_units

    engine, month = demo["engine"], demo["month"]
    judge_config = evaluate_release(engine, month, judge="local", metrics=["reference_coverage"])["judge_config"]
    before = load_leaderboard(engine, month, judge_config)
    columns = _view_columns(engine)
    with registry.registered_family(SCRATCH, SCRATCH_DIMENSIONS), registry.registered(ScratchDensity()):
        assert registry.metric_names("scratch") == ("scratch_density",)
        assert registry.metric_names(registry.CORE) == CORE and registry.tracks()[-1] == "scratch"
        # Judged by default only with its track enabled; an unknown track is refused by name.
        monkeypatch.delenv("DEEPSCHOLAR_TRACKS", raising=False)
        assert {u["metric"] for u in plan_units(engine, month)} == set(CORE)
        monkeypatch.setenv("DEEPSCHOLAR_TRACKS", "scratch")
        assert "scratch_density" in {u["metric"] for u in plan_units(engine, month)}
        monkeypatch.setenv("DEEPSCHOLAR_TRACKS", "scratch,vibes")
        with pytest.raises(InvalidInput, match="unknown evaluation tracks: vibes; known: .*reportbench, .*scratch"):
            plan_units(engine, month)
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
        # The track has a board of its own, ranked by its first metric (the family names no ranking metric),
        # its own SQL view, and a section of the page below the core table.
        scratch = load_leaderboard(engine, month, judge_config, track="scratch")
        assert scratch and all(r["ranking_metric"] == "scratch_density" for r in scratch)
        assert [r["rank"] for r in scratch] == sorted(r["rank"] for r in scratch)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM leaderboard_track_scratch WHERE release_id = :r"),
                                {"r": month}).scalar() == len(scratch)
        with serve(create_app(lambda: engine)) as url:
            page = httpx.get(f"{url}/", params={"release": month, "judge_config": judge_config}, timeout=30)
        assert page.status_code == 200
        core_table, _, tracks_part = page.text.partition('<section class="track"')
        assert "scratch_density" not in core_table
        assert 'data-track="scratch"' in tracks_part and 'data-metric="scratch_density"' in tracks_part
    assert "scratch" not in registry.tracks() and registry.metric_names(registry.CORE) == CORE
    # Gone from the registry: the next roll-up drops its board and its view.
    roll_up(engine, month, judge_config, n_boot=50)
    assert load_leaderboard(engine, month, judge_config, track="reportbench") is not None
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM track_boards WHERE family = 'scratch'")).scalar() == 0
        assert conn.execute(sa.text("SELECT to_regclass('deepscholar.leaderboard_track_scratch')")).scalar() is None


def test_the_reportbench_bibliography_metrics_judge_a_real_month_beside_an_unchanged_core(demo, monkeypatch):
    """The track's two judge-free metrics, enabled with `deepscholar evaluate --tracks`, over the demo month's
    stored reports (exemplar bibliographies with DOIs and cited-by counts read from the warehouse)."""
    import os
    import subprocess
    import sys

    engine, month = demo["engine"], demo["month"]
    monkeypatch.delenv("DEEPSCHOLAR_TRACKS", raising=False)
    judge_config = evaluate_release(engine, month, judge="local")["judge_config"]  # the core, all of it
    with engine.begin() as conn:  # whatever another test of this module judged of the track, judged anew here
        for table in ("metric_scores", "judgments"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE metric = ANY(:m)"),
                         {"m": list(registry.metric_names("reportbench"))})
    before = load_leaderboard(engine, month, judge_config)

    def cli(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   DEEPSCHOLAR_DB_URL=engine.url.render_as_string(hide_password=False))
        return subprocess.run([sys.executable, "-m", "deepscholar.cli", "evaluate", "--release", month,
                               "--judge", "local", *args], capture_output=True, text=True, env=env, timeout=300)

    refused = cli("--tracks", "reportbench,vibes")  # a comma list, as `release enrich --tracks` reads it
    assert refused.returncode == 2 and "unknown evaluation tracks: vibes; known: " in refused.stderr
    assert ", ".join(registry.tracks()) in refused.stderr
    done = cli("--tracks", "reportbench", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    # Only the track's metrics had anything left to judge.
    assert {r["metric"] for r in result["runs"] if r["reports"]} == set(registry.metric_names("reportbench"))
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


def test_a_tracks_board_is_rolled_up_apart_from_the_core_and_shown_by_cli_sql_and_agreement(demo):
    """The ReportBench board: its own rows (track_boards, track_board_metrics), its own SQL view, the CLI's
    `leaderboard --track` in every format, the agreement between the core's and the track's rankings, and
    a roll-up re-run that changes no row."""
    import os
    import subprocess
    import sys

    from deepscholar.evaluation.boards.rank_agreement import load_agreement

    engine, month = demo["engine"], demo["month"]
    judge_config = evaluate_release(engine, month, judge="local", tracks=["reportbench"])["judge_config"]
    core = load_leaderboard(engine, month, judge_config)
    board = load_leaderboard(engine, month, judge_config, track="reportbench")
    assert {r["system_id"] for r in board} == {r["system_id"] for r in core}
    assert all(list(r["metrics"]) == list(registry.metric_names("reportbench")) for r in board)
    assert {"reference_recall", "reference_precision"} <= set(board[0]["metrics"])
    assert [r["rank"] for r in board] == sorted(r["rank"] for r in board)
    human = next(r for r in board if r["system_kind"] == "human_exemplar")
    assert human["metrics"]["reference_recall"]["mean"] == 1.0
    assert not any(d["is_best"] for d in human["metrics"].values())  # the reference never competes
    recall = [r["reference_recall"] for r in board if r["reference_recall"] is not None]
    assert all(a >= b for a, b in zip(recall, recall[1:], strict=False))  # ranked by its ranking metric

    def cli(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   DEEPSCHOLAR_DB_URL=engine.url.render_as_string(hide_password=False))
        return subprocess.run([sys.executable, "-m", "deepscholar.cli", "leaderboard", "--release", month,
                               "--judge", "local", *args], capture_output=True, text=True, env=env, timeout=120)

    shown = cli("--track", "reportbench", "--format", "json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    as_json = json.loads(shown.stdout)
    assert {e["track"] for e in as_json} == {"reportbench"} and all(e["local_judge"] for e in as_json)
    assert all(e["ranking_metric"] == "reference_recall" and "geometric_mean" not in e for e in as_json)
    assert {e["system_id"]: e["metrics"]["reference_recall"]["mean"] for e in as_json} == {
        r["system_id"]: r["reference_recall"] for r in board}
    table = cli("--track", "reportbench")
    assert table.returncode == 0 and "ReportBench track" in table.stdout and "offline local judge" in table.stdout
    assert "Geo mean" not in table.stdout and "ranked by" in table.stdout
    assert "reference_precision_n" in cli("--track", "reportbench", "--format", "csv").stdout.splitlines()[0]
    unknown = cli("--track", "vibes")
    assert unknown.returncode == 2 and "unknown evaluation track 'vibes'" in unknown.stderr

    # Beside the board, ReportBench's own aggregation from the same stored scores (evaluation/boards/published.py).
    published = cli("--track", "reportbench", "--as-published", "--format", "json")
    assert published.returncode == 0, published.stderr[-2000:]
    figures = {e["system_id"]: e for e in json.loads(published.stdout)}
    with engine.connect() as conn:
        academic = dict(conn.execute(sa.text(
            "SELECT r.system_id, avg(m.value) FROM reports r JOIN metric_scores m ON m.report_id = r.report_id "
            "WHERE r.release_id = :r AND r.status = 'ok' AND m.judge_config = :j "
            "AND m.metric = 'reference_precision' AND m.variant = 'academic' GROUP BY r.system_id"),
            {"r": month, "j": judge_config}).all())
    assert set(figures) == {r["system_id"] for r in board}
    assert {s: figures[s]["reference_precision_academic"] for s in academic} == {
        s: pytest.approx(v) if v is not None else None for s, v in academic.items()}
    assert figures[human["system_id"]]["human_exemplar"] is True
    assert all(0.0 <= (e["reference_recall_q1_pooled"] or 0.0) <= 1.0 for e in figures.values())
    assert "not our board" in cli("--track", "reportbench", "--as-published").stdout
    core_only = cli("--as-published")
    assert core_only.returncode == 2 and "already aggregates as its authors'" in core_only.stderr

    # SQL: one view per track, generated from the registry, with the board's means.
    with engine.connect() as conn:
        wide = dict(conn.execute(sa.text(
            "SELECT system_id, reference_recall FROM leaderboard_track_reportbench "
            "WHERE release_id = :r AND judge_config = :j"), {"r": month, "j": judge_config}).all())
    assert wide == {r["system_id"]: pytest.approx(r["reference_recall"]) if r["reference_recall"] is not None
                    else None for r in board}
    with engine.connect() as conn:  # the local judge's numbers say so in SQL too
        labelled = {view: set(conn.execute(sa.text(
            f"SELECT local_judge FROM {view} WHERE release_id = :r AND judge_config = :j"),
            {"r": month, "j": judge_config}).scalars()) for view in ("leaderboard_track_reportbench", "leaderboard")}
    assert labelled == {"leaderboard_track_reportbench": {True}, "leaderboard": {True}}

    # Do the boards agree? The core against the track, over the competing systems.
    (pair,) = load_agreement(engine, month, judge_config)
    contenders = [r for r in board if r["system_kind"] != "human_exemplar" and r["reference_recall"] is not None]
    assert (pair["family_a"], pair["family_b"]) == ("core", "reportbench")
    assert pair["n_systems"] == len(contenders) >= 2
    assert pair["kendall_tau"] is None or -1.0 <= pair["kendall_tau"] <= 1.0
    agreement = cli("--agreement")
    assert agreement.returncode == 0 and "DeepScholar-Bench" in agreement.stdout and "ReportBench" in agreement.stdout

    # The page: a section for the track and the agreement table; the API serves both.
    with serve(create_app(lambda: engine)) as url:
        page = httpx.get(f"{url}/", params={"release": month, "judge_config": judge_config}, timeout=30)
        api = httpx.get(f"{url}/api/leaderboard", params={"release": month, "judge_config": judge_config},
                        timeout=30).json()
    assert page.status_code == 200 and 'data-local-judge="true"' in page.text
    assert '<section class="track" id="track-reportbench" data-track="reportbench">' in page.text
    assert 'data-pair="core:reportbench"' in page.text
    assert {r["system_id"]: r["metrics"]["reference_recall"]["mean"] for r in api["tracks"]["reportbench"]["rows"]} == {
        r["system_id"]: r["reference_recall"] for r in board}
    assert [(a["family_a"], a["family_b"]) for a in api["agreement"]] == [("core", "reportbench")]
    # ReportBench's own aggregation, kept with the board version: the page's track section and the API show
    # the same figures the CLI printed.
    table = parse_html(page.text).one("table", {"class": "as-published", "data-track": "reportbench"})
    shown_figures = {row.attrs["data-system"]: {td.attrs["data-figure"]: td.attrs["data-value"]
                                                for td in row.find_all("td", {"data-figure": True})}
                     for row in table.find_all("tr", {"data-system": True})}
    assert set(shown_figures) == set(figures)
    for system, values in shown_figures.items():
        expected = figures[system]["reference_precision_academic"]
        assert values["reference_precision_academic"] == ("" if expected is None else repr(expected))
    assert {r["system_id"]: r["reference_precision_academic"] for r in api["tracks"]["reportbench"]["as_published"]} \
        == {s: e["reference_precision_academic"] for s, e in figures.items()}

    # A second roll-up on unchanged scores writes nothing.
    def snapshot() -> list:
        with engine.connect() as conn:
            return [conn.execute(sa.text(f"SELECT * FROM {t} WHERE release_id = :r ORDER BY 1, 2, 3, 4")
                                 , {"r": month}).all()
                    for t in ("track_boards", "track_board_metrics", "board_agreement", "board_published_figures")]

    before = snapshot()
    roll_up(engine, month, judge_config)
    assert snapshot() == before

    # The GX gate checks the track's board with the core's: a fraction above 1 is caught and named.
    from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard

    assert check_leaderboard(engine, month, judge_config).success
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE track_board_metrics SET mean = 1.5 WHERE release_id = :r AND judge_config = :j "
                             "AND metric = 'reference_precision' AND system_id = :s"),
                     {"r": month, "j": judge_config, "s": board[-1]["system_id"]})
    bad = check_leaderboard(engine, month, judge_config)
    assert bad.failed_checks == ["metric_mean_in_unit_range"]
    (row,) = {c["name"]: c for c in bad.checks}["metric_mean_in_unit_range"]["details"]["unexpected_rows"]
    assert (row["family"], row["metric"]) == ("reportbench", "reference_precision")
    roll_up(engine, month, judge_config)  # the roll-up writes the computed value back (and says when)
    assert snapshot()[1] == before[1]


def test_enriching_a_published_month_adds_the_tracks_artefacts_and_leaves_its_core_byte_identical(demo):
    """`deepscholar release enrich` on the published demo month: RACE's rubrics and the claims track's ground
    truth are added and gated; the release's own rows, status and core scores do not change by a byte. Then
    the RACE board: the human section is 0.5 by construction, every system in [0, 1]."""
    import os
    import subprocess
    import sys

    engine, month = demo["engine"], demo["month"]
    evaluate_release(engine, month, judge="local", tracks=[])

    def core_state() -> list:
        with engine.connect() as conn:
            return [conn.execute(sa.text(sql), {"r": month}).all() for sql in (
                "SELECT * FROM releases WHERE release_id = :r",
                "SELECT * FROM release_queries WHERE release_id = :r ORDER BY arxiv_id",
                "SELECT * FROM exemplar_references WHERE release_id = :r ORDER BY arxiv_id, cite_key",
                "SELECT * FROM nuggets WHERE release_id = :r ORDER BY arxiv_id, nugget_idx",
                "SELECT m.* FROM metric_scores m JOIN reports r USING (report_id) WHERE r.release_id = :r "
                "ORDER BY m.report_id, m.metric, m.judge_config, m.variant")]

    def cli(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   DEEPSCHOLAR_DB_URL=engine.url.render_as_string(hide_password=False))
        return subprocess.run([sys.executable, "-m", "deepscholar.cli", *args], capture_output=True, text=True,
                              env=env, timeout=300)

    before = core_state()
    assert before[0][0].status == "published"
    enriched = cli("release", "enrich", month, "--tracks", "race,claims", "--json")
    assert enriched.returncode == 0, enriched.stderr[-3000:]
    result = json.loads(enriched.stdout)
    assert result["gx_success"] and result["status"] == "published"
    assert core_state() == before
    with engine.connect() as conn:
        n_queries = conn.execute(sa.text("SELECT count(*) FROM release_queries WHERE release_id = :r"),
                                 {"r": month}).scalar()
        rubric_queries = conn.execute(sa.text(
            "SELECT count(DISTINCT arxiv_id) FROM race_rubrics WHERE release_id = :r"), {"r": month}).scalar()
        made = dict(conn.execute(sa.text(
            "SELECT track, gx_success FROM release_track_artefacts WHERE release_id = :r"), {"r": month}).all())
    assert rubric_queries == n_queries and result["tracks"]["race"]["built"] == n_queries
    assert made == {"race": True, "claims": True}
    again = json.loads(cli("release", "enrich", month, "--tracks", "race", "--json").stdout)
    assert again["tracks"]["race"]["built"] == 0 and again["tracks"]["race"]["kept"] == n_queries
    unknown = cli("release", "enrich", month, "--tracks", "fact")
    assert unknown.returncode == 2 and "no release-time artefacts for track(s) fact" in unknown.stderr

    evaluate_release(engine, month, judge="local", tracks=["race"])
    shown = cli("leaderboard", "--release", month, "--judge", "local", "--track", "race", "--format", "json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    board = json.loads(shown.stdout)
    human = next(e for e in board if e["system_kind"] == "human_exemplar")
    assert human["metrics"]["race_overall"]["mean"] == 0.5
    values = [e["metrics"][m]["mean"] for e in board for m in registry.metric_names("race")]
    assert all(v is not None and 0.0 <= v <= 1.0 for v in values)
    assert core_state()[1:4] == before[1:4]  # judging the track wrote no release row either


# A throwaway track, written out as its own folder (a package outside the library, as a plugin's would be):
# its family and dimension, the per-query data its metric reads, one metric, one release-time artefact,
# and the migration of the artefact's table. Nothing else is touched.
THROWAWAY_TRACK = {
    "__init__.py": '''
        """A throwaway track: what share of its query's exemplar references a report cites."""
        from deepscholar.evaluation.metrics.registry import Dimension, Family, QueryData

        FAMILY = Family("throwaway", "Throwaway", 95, ranking_metric="cited_share")
        DIMENSIONS = (Dimension("throwaway_citing", "Citing", "throwaway", 1),)
        QUERY_DATA = QueryData(sql="SELECT arxiv_id, target FROM throwaway_targets WHERE {where} ORDER BY arxiv_id",
                               build=lambda rows: rows[0]["target"])
    ''',
    "cited_share.py": '''
        from deepscholar.evaluation.metrics.base import Item, ItemJudgment, Score, compose_version, report_unscored

        class CitedShare:
            name, dimension, position, label = "cited_share", "throwaway_citing", 1, "Cited share"
            headline, variants = "share", ("share",)

            @property
            def version(self):
                return compose_version("d1")

            def items(self, report):
                return [Item("body")]

            def judge_llm(self, client, report, item):
                raise AssertionError("judged locally")

            def judge_local(self, report, items):
                target = report.query.family_data.get("throwaway")
                if target is None:
                    return [ItemJudgment(i.key, None, unscored_reason="no target: release enrich --tracks throwaway")
                            for i in items]
                return [ItemJudgment(i.key, {"cited": len(report.cited_sources), "target": target}) for i in items]

            def score(self, report, judgments):
                failed = report_unscored(self.variants, judgments)
                if failed:
                    return failed
                label = judgments[0].label
                return [Score("share", min(1.0, label["cited"] / label["target"]), n_items=1)]

        METRIC = CitedShare()
    ''',
    "targets.py": '''
        import sqlalchemy as sa

        from deepscholar.gx import Check
        from deepscholar.release.track_declaration import TrackArtefacts

        def build(ctx):
            with ctx.engine.begin() as conn:
                made = conn.execute(sa.text("""
                    INSERT INTO deepscholar.throwaway_targets (release_id, arxiv_id, target)
                    SELECT q.release_id, q.arxiv_id, greatest(1, count(e.cite_key))
                    FROM deepscholar.release_queries q
                    LEFT JOIN deepscholar.exemplar_references e USING (release_id, arxiv_id)
                    WHERE q.release_id = :r GROUP BY q.release_id, q.arxiv_id
                    ON CONFLICT DO NOTHING"""), {"r": ctx.release_id}).rowcount
            return {"targets": made}

        ARTEFACTS = TrackArtefacts(
            track="throwaway", build=build, judge_config=lambda ctx: "none", prompt_versions=lambda ctx: {},
            frames={"throwaway_targets": "SELECT arxiv_id, target FROM deepscholar.throwaway_targets "
                                         "WHERE release_id = :r"},
            checks=lambda gxe: [Check("throwaway_target_positive", "throwaway_targets",
                                      gxe.ExpectColumnValuesToBeBetween(column="target", min_value=1), ["arxiv_id"])])
    ''',
    "migration.sql": '''
        CREATE TABLE deepscholar.throwaway_targets (
            release_id text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
            arxiv_id   text NOT NULL,
            target     integer NOT NULL CHECK (target > 0),
            PRIMARY KEY (release_id, arxiv_id))
    ''',
}


def test_a_track_is_one_folder_judged_rolled_up_shown_exported_and_in_the_agreement_table(
        demo, tmp_path, monkeypatch):
    import textwrap

    from deepscholar.export.writer import export_release
    from deepscholar.release.context import ReleaseContext
    from deepscholar.release.track_artefacts import artefacts, enrich_release

    engine, month = demo["engine"], demo["month"]
    folder = tmp_path / "throwaway_track"
    folder.mkdir()
    for name, text in THROWAWAY_TRACK.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with engine.begin() as conn:
        conn.execute(sa.text((folder / "migration.sql").read_text(encoding="utf-8")))
    try:
        with registry.added_family("throwaway_track"):
            assert registry.tracks()[-1] == "throwaway" and registry.metric_names("throwaway") == ("cited_share",)
            assert "throwaway" in artefacts()  # the release finds the artefact in the folder
            enriched = enrich_release(ReleaseContext.load(engine, month), ["throwaway"])
            assert enriched["gx_success"], enriched
            judge_config = evaluate_release(engine, month, judge="local", metrics=[*CORE, "cited_share"])["judge_config"]
            with engine.connect() as conn:
                # Judged, reading its per-query data: each report's share is against its own query's target.
                scored = conn.execute(sa.text("""
                    SELECT m.value, m.unscored_reason, t.target, r.report_id
                    FROM metric_scores m JOIN reports r USING (report_id)
                    JOIN throwaway_targets t ON t.release_id = r.release_id AND t.arxiv_id = r.arxiv_id
                    WHERE r.release_id = :r AND m.metric = 'cited_share' AND m.judge_config = :j"""),
                    {"r": month, "j": judge_config}).all()
                in_view = conn.execute(sa.text(
                    "SELECT count(*) FROM leaderboard_track_throwaway WHERE release_id = :r"), {"r": month}).scalar()
                agreement = conn.execute(sa.text(
                    "SELECT family_a, family_b, n_systems FROM board_agreement WHERE release_id = :r "
                    "AND judge_config = :j AND 'throwaway' IN (family_a, family_b)"),
                    {"r": month, "j": judge_config}).all()
            assert scored and all(reason is None for _, reason, _, _ in scored)
            assert len({target for _, _, target, _ in scored}) > 1  # the targets differ by query
            # Rolled up into a board of its own, in its SQL view, and in the agreement with every other board.
            board = load_leaderboard(engine, month, judge_config, track="throwaway")
            assert board and all(r["ranking_metric"] == "cited_share" for r in board)
            assert in_view == len(board)
            assert ("core", "throwaway") in {(a, b) for a, b, _ in agreement}
            with serve(create_app(lambda: engine)) as url:
                page = httpx.get(f"{url}/", params={"release": month, "judge_config": judge_config}, timeout=30)
            assert page.status_code == 200
            assert 'data-track="throwaway"' in page.text and 'data-metric="cited_share"' in page.text
            exported = tmp_path / "export"
            export_release(engine, month, exported, judge=judge_config)
            assert "throwaway" in (exported / "track_boards.csv").read_text(encoding="utf-8")
            assert "cited_share" in (exported / "metrics.csv").read_text(encoding="utf-8")
        # Gone with its folder: not a track, no artefacts, and the next roll-up drops its board and view.
        assert "throwaway" not in registry.tracks() and "throwaway" not in artefacts()
        roll_up(engine, month, judge_config, n_boot=50)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT to_regclass('deepscholar.leaderboard_track_throwaway')")).scalar() is None
    finally:
        with engine.begin() as conn:
            for table in ("metric_scores", "judgments"):
                conn.execute(sa.text(f"DELETE FROM {table} WHERE metric = 'cited_share'"))
            conn.execute(sa.text("DELETE FROM release_track_artefacts WHERE track = 'throwaway'"))
            conn.execute(sa.text("DROP TABLE IF EXISTS deepscholar.throwaway_targets"))
