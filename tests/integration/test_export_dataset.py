"""The export folder as a Hugging Face dataset repository, read by the real `datasets` and `duckdb`
libraries (test dependencies: they are what the field loads benchmark data with, and what the card promises).

A judged month (test_export's judged_month) and a month with nothing judged are exported; every table with
rows loads with `datasets.load_dataset(folder, table)` at its Parquet types, DuckDB reads every file at the
same types, no column is untyped, both months' tables have the same schemas, the card's DuckDB query gives
the board's numbers, and texts withheld for their licence stay withheld through `datasets` too."""

from __future__ import annotations

import re

import datasets
import duckdb
import huggingface_hub
import pandas as pd
import pyarrow.parquet as pq
import sqlalchemy as sa
from integration import test_export
from integration.test_export import _licences
from integration.test_leaderboard import JUDGE

from deepscholar.export import export_release
from deepscholar.export.hub import DUCKDB_EXAMPLE
from deepscholar.export.tables import TABLES, TEXT_COLUMNS
from deepscholar.replay.demo_snapshot import ARXIV_NONEXCLUSIVE, CC_BY

EMPTY_MONTH = "2025-02"
judged_month = test_export.judged_month  # the fixture: a judged, rolled-up, published month


def _load(folder, name: str, cache):
    return datasets.load_dataset(str(folder), name, split="train", cache_dir=str(cache))


def _duckdb_types(path) -> dict[str, str]:
    return {row[0]: row[1] for row in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()}


def _empty_month(engine) -> None:
    """A release with queries and nothing else: every board table of its export is empty."""
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO releases (release_id, status) VALUES (:r, 'published')"), {"r": EMPTY_MONTH})
        conn.execute(sa.text("""INSERT INTO release_queries (release_id, arxiv_id, title, abstract, section_raw_latex,
                                                            section_text, word_count)
                                VALUES (:r, '2502.00001', 'T', 'A', 'x', 'x', 1)"""), {"r": EMPTY_MONTH})


def test_every_table_with_rows_loads_with_datasets_and_duckdb_at_its_types(engine, judged_month, tmp_path):
    release, queries = judged_month["release_id"], judged_month["queries"]
    _licences(engine, {queries[0]: CC_BY, queries[1]: ARXIV_NONEXCLUSIVE})
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE release_queries SET section_text = 'the exemplar ' || arxiv_id"))
    out = tmp_path / "month"
    result = export_release(engine, release, out)

    card = huggingface_hub.DatasetCard.load(out / "README.md")  # the Hub's own parser of the header
    assert card.data.license == "other" and card.data.pretty_name == f"DeepScholar live benchmark, release {release}"
    declared = {c["config_name"]: c["data_files"] for c in card.data.configs}
    with_rows = [name for name, n in result.rows.items() if n]
    assert list(declared) == with_rows and set(result.rows) - set(with_rows)  # this month has empty tables
    assert all(files == [{"split": "train", "path": f"{name}.parquet"}] for name, files in declared.items())
    assert "@article{patel2025deepscholarbench" in card.text and "arXiv:2508.20033" in card.text
    assert "hf upload OWNER/deepscholar-live-2025-01 DIR . --repo-type dataset" in card.text
    for name in set(result.rows) - set(with_rows):
        assert f"`{name}`" in card.text.split("so not a config")[1].split("\n")[0]

    for name in with_rows:
        schema = pq.read_schema(out / f"{name}.parquet")
        loaded = _load(out, name, tmp_path / "hf")
        assert loaded.num_rows == result.rows[name]
        assert loaded.features.arrow_schema.types == schema.types, name  # nothing re-typed on the way
        frame = loaded.to_pandas()
        expected = pd.read_parquet(out / f"{name}.parquet")
        pd.testing.assert_frame_equal(frame, expected, check_dtype=False)
    for table in TABLES:
        schema = pq.read_schema(out / f"{table.name}.parquet")
        assert "null" not in {str(t) for t in schema.types}, (table.name, schema)
        assert all(str(schema.field(c).type) == "large_string" for c in TEXT_COLUMNS if c in schema.names)
        described = _duckdb_types(out / f"{table.name}.parquet")
        assert list(described) == table.names and '"NULL"' not in described.values(), (table.name, described)

    scores = _load(out, "metric_scores", tmp_path / "hf").features
    assert (str(scores["value"].dtype), str(scores["is_current"].dtype), str(scores["arxiv_id"].dtype)) == \
        ("float64", "bool", "large_string")
    assert str(_load(out, "queries", tmp_path / "hf").features["published"].dtype).startswith("timestamp[us")

    # Withheld texts stay withheld for `datasets` readers; published ones are there.
    texts = _load(out, "queries", tmp_path / "hf").to_pandas().set_index("arxiv_id")["section_text"]
    assert texts[queries[0]] == f"the exemplar {queries[0]}"
    assert texts.drop(queries[0]).isna().all()

    # The card's DuckDB query gives the board's column for that metric (the exported board).
    sql = re.search(r"```sql\n(.*?)```", card.text, re.S).group(1)
    assert sql.strip() == DUCKDB_EXAMPLE
    got = duckdb.sql(sql.replace("read_parquet('", f"read_parquet('{out}/")).fetchall()
    board = pd.read_parquet(out / "leaderboard_metrics.parquet")
    board = board[board["metric"] == "nugget_coverage"].set_index(["judge_config", "system_id"])["mean"]
    assert got and {(j, s) for j, s, _ in got} == set(board.index)
    assert all(abs(mean - board[(j, s)]) < 1e-12 for j, s, mean in got) and {j for j, _, _ in got} == {JUDGE}


def test_two_months_share_every_schema_even_when_one_has_no_rows(engine, judged_month, tmp_path):
    _empty_month(engine)
    full = export_release(engine, judged_month["release_id"], tmp_path / "full")
    empty = export_release(engine, EMPTY_MONTH, tmp_path / "empty")
    assert empty.rows["metric_scores"] == 0 and full.rows["metric_scores"] > 0
    for table in TABLES:
        a, b = (pq.read_schema(folder / f"{table.name}.parquet") for folder in (full.out, empty.out))
        assert a.equals(b, check_metadata=False), (table.name, a, b)
    card = huggingface_hub.DatasetCard.load(empty.out / "README.md")
    assert [c["config_name"] for c in card.data.configs] == [n for n, rows in empty.rows.items() if rows]
    # An export with the card header is still recognised as an export: exporting again replaces it whole.
    (empty.out / "stale.csv").write_text("x")
    export_release(engine, EMPTY_MONTH, empty.out)
    assert not (empty.out / "stale.csv").exists()
