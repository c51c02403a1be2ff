"""`deepscholar export` against real Postgres: a judged, rolled-up month (the leaderboard tests' seed_month plus
scores for every track's metrics) is exported, loaded back with pandas alone, and its boards recomputed from
the exported scores equal the exported boards and the warehouse's; texts the licences forbid are withheld and
counted while titles and abstracts stay."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import sqlalchemy as sa
from integration.test_leaderboard import JUDGE, seed_month

from deepscholar import cli
from deepscholar.evaluation.boards.board_versions import publish_board
from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
from deepscholar.evaluation.boards.rollup import roll_up
from deepscholar.evaluation.metrics import registry
from deepscholar.export import export_release
from deepscholar.replay.demo_snapshot import ARXIV_NONEXCLUSIVE, CC_BY

TOL = 1e-12
# What the datacard tells CSV readers: ids are text (2501.00010 would otherwise become a float).
TEXT = {"arxiv_id": str, "system_id": str, "cite_key": str}


def _add_track_scores(engine, release_id: str) -> None:
    """Headline scores of every track metric (from the registry) for every ok report judged by JUDGE."""
    with engine.begin() as conn:
        reports = conn.execute(sa.text("""
            SELECT r.report_id, r.system_id, r.arxiv_id FROM reports r
             WHERE r.release_id = :r AND r.status = 'ok'
               AND EXISTS (SELECT 1 FROM metric_scores m WHERE m.report_id = r.report_id AND m.judge_config = :j)
             ORDER BY 1"""), {"r": release_id, "j": JUDGE}).all()
        rows = []
        for track in registry.tracks():
            for i, metric in enumerate(registry.metrics(track)):
                for k, (report_id, system_id, _) in enumerate(reports):
                    value = None if (k + i) % 11 == 5 else round(((k * 7 + i * 3 + len(system_id)) % 13) / 13, 4)
                    rows.append({"id": report_id, "m": metric.name, "j": JUDGE, "v": metric.headline,
                                 "ver": f"d1+{metric.name}_v1", "val": value,
                                 "why": None if value is not None else "judge answer unparseable"})
        conn.execute(sa.text("""
            INSERT INTO metric_scores (report_id, metric, judge_config, variant, metric_version, value, unscored_reason)
            VALUES (:id, :m, :j, :v, :ver, :val, :why)"""), rows)


def _licences(engine, rows: dict[str, str | None]) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO paper_licences (arxiv_id, license) VALUES (:a, :l)"),
                     [{"a": a, "l": licence} for a, licence in rows.items()])


@pytest.fixture
def judged_month(engine):
    month = seed_month(engine, n_queries=6)
    release = month["release_id"]
    _add_track_scores(engine, release)
    with engine.begin() as conn:  # epsilon has no ok report under JUDGE: inactive, so the gate passes
        conn.execute(sa.text("UPDATE systems SET active = false WHERE system_id = 'epsilon'"))
        # beta's model may have read this month's papers: shown, not ranked, and the export says why.
        conn.execute(sa.text("UPDATE systems SET model_knowledge = true, knowledge_cutoff = '2099-01-01' "
                             "WHERE system_id = 'beta'"))
        conn.execute(sa.text("INSERT INTO judge_configs (judge_config, kind, model) VALUES (:j, 'local', 'MiniLM')"),
                     {"j": JUDGE})
    roll_up(engine, release, JUDGE, n_boot=100)
    assert check_leaderboard(engine, release, JUDGE).success
    publish_board(engine, release, JUDGE)
    return month


# --- what a reader does: pandas alone, no deepscholar import -------------------------------------------------

def _load(folder, name: str, fmt: str) -> pd.DataFrame:
    return pd.read_csv(folder / f"{name}.csv", dtype=TEXT) if fmt == "csv" else pd.read_parquet(folder / f"{name}.parquet")


def _ranks(frame: pd.DataFrame, by: str, unranked: set[str]) -> pd.Series:
    """Ranks by `by` (best first, ties the better rank) among the systems not in `unranked` (NaN there)."""
    ranked = ~frame["system_id"].isin(unranked)
    return frame[ranked].groupby("judge_config")[by].rank(method="min", ascending=False).reindex(frame.index)


def _recompute(folder, fmt: str) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The core board (per judge and system: each core metric's headline mean over ok reports, unscored left
    out; their geometric mean; the rank by it among the systems the board does not mark may_have_seen) and
    each track's ranking-metric means, from the files."""
    scores, metrics = _load(folder, "metric_scores", fmt), _load(folder, "metrics", fmt)
    systems = _load(folder, "leaderboard_systems", fmt)
    unranked = set(systems.loc[systems["contamination"] == "may_have_seen", "system_id"])
    headline = dict(zip(metrics["metric"], metrics["headline_variant"], strict=True))
    ok = scores[(scores["report_status"] == "ok") & (scores["variant"] == scores["metric"].map(headline))]
    means = ok.groupby(["judge_config", "system_id", "metric"])["value"].mean()
    core = list(metrics.loc[metrics["family"] == "core", "metric"])
    rows = []
    for (judge, system), per_metric in means.groupby(level=["judge_config", "system_id"]):
        values = [per_metric.get((judge, system, m), float("nan")) for m in core]
        gm = (float("nan") if any(math.isnan(v) for v in values) else 0.0 if any(v == 0 for v in values)
              else math.exp(sum(math.log(v) for v in values) / len(values)))
        rows.append({"judge_config": judge, "system_id": system, "geometric_mean": gm,
                     **{m: v for m, v in zip(core, values, strict=True)}})
    board = pd.DataFrame(rows)
    board["rank"] = _ranks(board, "geometric_mean", unranked)
    tracks = {}
    for track, metric in metrics.dropna(subset=["ranks_track"])[["ranks_track", "metric"]].itertuples(index=False):
        series = means.xs(metric, level="metric").rename("mean").reset_index()
        series["rank"] = _ranks(series, "mean", unranked)
        tracks[track] = series
    return board, tracks


def _same_rank(*ranks) -> bool:
    """Equal ranks, an unranked system (NaN / None / empty) equal to unranked only."""
    as_int = [None if r is None or (isinstance(r, float) and math.isnan(r)) or r is pd.NA or r == ""
              else int(r) for r in ranks]
    return len(set(as_int)) == 1


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_exported_boards_recompute_from_the_exported_scores_with_pandas_alone(engine, judged_month, tmp_path, fmt):
    release = judged_month["release_id"]
    _licences(engine, dict.fromkeys(judged_month["queries"], CC_BY))
    out = tmp_path / "export"
    result = export_release(engine, release, out, judge=JUDGE)
    assert result.formats == ("csv", "parquet") and result.withheld_papers == 0
    assert result.rows["queries"] == 6 and result.rows["leaderboard_systems"] == 3

    board, tracks = _recompute(out, fmt)
    exported = _load(out, "leaderboard_systems", fmt).set_index("system_id")
    exported_means = _load(out, "leaderboard_metrics", fmt).set_index(["system_id", "metric"])["mean"]
    with engine.connect() as conn:
        stored = {r.system_id: (r.geometric_mean, r.rank) for r in conn.execute(sa.text(
            "SELECT * FROM leaderboard_systems JOIN board_current USING (release_id, judge_config, board_version) "
            "WHERE release_id = :r AND judge_config = :j"), {"r": release, "j": JUDGE})}
    assert set(board["system_id"]) == set(exported.index) == set(stored) == {"alpha", "beta", "gamma"}
    assert exported.loc["beta", "contamination"] == "may_have_seen" and pd.isna(exported.loc["beta", "rank"])
    assert str(exported.loc["beta", "knowledge_cutoff"]).startswith("2099-01-01")
    assert set(exported["contamination"].dropna()) == {"may_have_seen"}  # alpha, gamma: model-free, ranked
    for row in board.itertuples():
        assert abs(row.geometric_mean - exported.loc[row.system_id, "geometric_mean"]) <= TOL
        assert abs(row.geometric_mean - stored[row.system_id][0]) <= TOL
        assert _same_rank(row.rank, exported.loc[row.system_id, "rank"], stored[row.system_id][1])
        for metric in registry.metric_names(registry.CORE):
            assert abs(getattr(row, metric) - exported_means[(row.system_id, metric)]) <= TOL

    exported_tracks = _load(out, "track_boards", fmt)
    track_means = _load(out, "track_board_metrics", fmt)
    assert set(tracks) == set(registry.tracks()) == set(exported_tracks["family"])
    with engine.connect() as conn:
        stored_tracks = {(r.family, r.system_id): (r.mean, r.rank) for r in conn.execute(sa.text("""
            SELECT b.family, b.system_id, m.mean, b.rank FROM track_boards b
              JOIN board_current USING (release_id, judge_config, board_version)
              JOIN track_board_metrics m USING (release_id, judge_config, board_version, family, system_id)
             WHERE b.release_id = :r AND m.metric = b.ranking_metric"""), {"r": release})}
    for track, recomputed in tracks.items():
        ranking = exported_tracks.loc[exported_tracks["family"] == track]
        assert set(ranking["ranking_metric"]) == {registry.ranking_metric(track)}
        for row in recomputed.itertuples():
            mean = track_means[(track_means["family"] == track) & (track_means["system_id"] == row.system_id)
                               & (track_means["metric"] == registry.ranking_metric(track))]["mean"].item()
            assert abs(row.mean - mean) <= TOL and abs(row.mean - stored_tracks[(track, row.system_id)][0]) <= TOL
            assert _same_rank(row.rank, ranking.loc[ranking["system_id"] == row.system_id, "rank"].item(),
                              stored_tracks[(track, row.system_id)][1])

    # Both formats hold the same columns; the datacard names every file and the provenance.
    for name in result.rows:
        assert list(pd.read_csv(out / f"{name}.csv").columns) == list(pd.read_parquet(out / f"{name}.parquet").columns)
    card = (out / "README.md").read_text()
    assert all(f"### {name}.csv" in card for name in result.rows)
    assert "manifest hash: **none: the release is not sealed" in card
    assert f"`{JUDGE}` v1 (published" in card and "| `local:all-MiniLM-L6-v2:v1` | local | MiniLM |" in card
    assert "0 of 6 papers' texts were left out for their licence" in card


def test_texts_the_licences_forbid_are_withheld_and_counted_while_titles_and_abstracts_stay(
        engine, judged_month, tmp_path, monkeypatch, capsys):
    release, queries = judged_month["release_id"], judged_month["queries"]
    with engine.begin() as conn:  # the human exemplar's report is the section itself
        conn.execute(sa.text("UPDATE release_queries SET section_text = 'the exemplar ' || arxiv_id"))
        conn.execute(sa.text("INSERT INTO systems (system_id, kind) VALUES ('human', 'human_exemplar')"))
        conn.execute(sa.text("""INSERT INTO reports (release_id, system_id, arxiv_id, status, text)
                                SELECT :r, 'human', arxiv_id, 'ok', section_text FROM release_queries
                                 WHERE release_id = :r"""), {"r": release})
    _licences(engine, {queries[0]: CC_BY, queries[1]: ARXIV_NONEXCLUSIVE, queries[2]: None})
    out = tmp_path / "export"
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
    assert cli.main(["export", "--release", release, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "deepscholar: warning: the licences of 3 of 6 query papers of 2025-01 were never fetched" in captured.err
    assert "texts withheld for their licence: 5 papers, 5 reports" in captured.out

    frame = pd.read_csv(out / "queries.csv", dtype=TEXT).set_index("arxiv_id")
    assert frame.loc[queries[0], "section_text"] == f"the exemplar {queries[0]}"
    assert pd.isna(frame.loc[queries[0], "text_withheld"]) and frame.loc[queries[0], "redistributable"]
    assert pd.isna(frame.loc[queries[1], "section_text"]) and pd.isna(frame.loc[queries[1], "section_raw_latex"])
    assert frame.loc[queries[1], "text_withheld"] == f"licence {ARXIV_NONEXCLUSIVE} does not allow redistribution"
    assert frame.loc[queries[2], "text_withheld"] == "licence unknown: arXiv's record names none"
    assert frame.loc[queries[3], "text_withheld"].startswith("licence never fetched")
    assert (frame["title"] == [f"Paper {a}" for a in frame.index]).all() and (frame["abstract"] == "abstract").all()
    reports = pd.read_csv(out / "reports.csv", dtype=TEXT)
    human = reports[reports["system_id"] == "human"].set_index("arxiv_id")
    assert human.loc[queries[0], "text"] == f"the exemplar {queries[0]}"
    assert human["text"].isna().sum() == 5 and human["text_withheld"].notna().sum() == 5
    assert reports.loc[reports["system_id"] == "alpha", "text"].notna().all()  # systems' own texts stay
    card = (out / "README.md").read_text()
    assert 'TEXT = {"arxiv_id": str' in card
    assert "WARNING: the licences of 3 of 6 query papers were never fetched" in card
    assert "**5 of 6 papers' texts were left out for their licence** (5 reports withheld with them)" in card
    assert f"| {queries[1]} | {ARXIV_NONEXCLUSIVE} | withheld |" in card
    assert f"| {queries[3]} | never fetched | withheld |" in card


def test_export_refuses_an_unknown_release_and_judge(engine, judged_month, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
    assert cli.main(["export", "--release", "2031-01", "--out", str(tmp_path)]) == 2
    assert cli.main(["export", "--release", judged_month["release_id"], "--out", str(tmp_path),
                     "--judge", "anthropic/claude-test"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("deepscholar: error: ") for line in err)
    assert "no scores of release 2025-01 under judge llm:anthropic/claude-test" in err[1]
