"""The GX release gate on small releases built row by row: a good one publishes, each defect fails its check."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.release.quality import (
    CHECK_NAMES,
    ReleaseNotGated,
    apply_gate,
    publish_release,
    run_release_gate,
)
from deepscholar.release.spec import ReleaseSpec

pytestmark = pytest.mark.slow  # builds a release per case

RELEASE = "2025-06"
WINDOW = (datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC))
QUERY_A, QUERY_B = "2506.01001", "2506.01002"
CONFIG = ReleaseSpec(max_words=1000, min_references=5, min_resolution_rate=0.5, require_venue=True)


# ------------------------------------------------------------------------------------------ builders


def add_release(conn, release_id, window=WINDOW, source="pipeline", status="building", config=None):
    db.upsert(conn, "releases", [{
        "release_id": release_id, "source": source, "window_start": window[0], "window_end": window[1],
        "config": config if config is not None else CONFIG.to_dict(), "status": status,
    }], key=["release_id"])


def add_query(conn, release_id, arxiv_id, *, published=datetime(2025, 6, 10, tzinfo=UTC), n_refs=6,
              n_important=2, n_nuggets=3, venue="ICML 2025"):
    """A query that passes every check: 6 resolved references (2 important), 3 nuggets."""
    db.upsert(conn, "release_queries", [{
        "release_id": release_id, "arxiv_id": arxiv_id, "version": 1, "title": f"Paper {arxiv_id}",
        "abstract": "An abstract.", "published": published, "venue": venue,
        "section_raw_latex": "Prior work \\cite{k0}.", "section_text": "Prior work [@k0].",
        "word_count": 300, "n_cite_keys": n_refs,
    }], key=["release_id", "arxiv_id"])
    db.upsert(conn, "exemplar_references", [{
        "release_id": release_id, "arxiv_id": arxiv_id, "cite_key": f"k{i}", "bib_title": f"Reference {i}",
        "resolved_arxiv_id": f"2401.{i:05d}", "resolution_method": "test", "cited_by_count": 10 * i,
        "is_important": i < n_important,
    } for i in range(n_refs)], key=["release_id", "arxiv_id", "cite_key"])
    db.upsert(conn, "nuggets", [{
        "release_id": release_id, "arxiv_id": arxiv_id, "nugget_idx": i, "text": f"Fact number {i}",
        "importance": "vital" if i == 0 else "okay", "judge_config": "test",
    } for i in range(n_nuggets)], key=["release_id", "arxiv_id", "nugget_idx"])


def build_good_release(engine, release_id=RELEASE):
    with engine.begin() as conn:
        add_release(conn, release_id)
        add_query(conn, release_id, QUERY_A)
        add_query(conn, release_id, QUERY_B, published=datetime(2025, 6, 30, 23, 59, tzinfo=UTC))


def execute(engine, sql, **params):
    with engine.begin() as conn:
        conn.execute(sa.text(sql), params)


def release_row(engine, release_id=RELEASE):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT * FROM deepscholar.releases WHERE release_id = :r"),
                            {"r": release_id}).mappings().one()


@pytest.fixture
def nugget_label_check_dropped(engine):
    """Lets a test store a label the schema forbids, as data from an older schema or a bypass would be."""
    with engine.begin() as conn:
        name = conn.execute(sa.text(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'deepscholar.nuggets'::regclass "
            "AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%importance%'")).scalar_one()
        conn.execute(sa.text(f'ALTER TABLE deepscholar.nuggets DROP CONSTRAINT "{name}"'))
    yield
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM deepscholar.nuggets WHERE importance NOT IN ('vital', 'okay')"))
        conn.execute(sa.text(f'ALTER TABLE deepscholar.nuggets ADD CONSTRAINT "{name}" '
                             "CHECK (importance IN ('vital', 'okay'))"))


# --------------------------------------------------------------------------------------------- tests


def test_good_release_passes_and_publishes(engine):
    build_good_release(engine)
    with pytest.raises(ReleaseNotGated):
        publish_release(engine, RELEASE)  # not gated yet

    result = run_release_gate(engine, RELEASE, CONFIG)
    assert result.success, result.summary
    assert result.failed_checks == []
    assert [c["name"] for c in result.checks] == list(CHECK_NAMES)
    rate = next(c for c in result.checks if c["name"] == "resolution_rate")
    assert rate["details"]["rate"] == 1.0

    assert apply_gate(engine, RELEASE, result) == "gated"
    row = release_row(engine)
    assert row["status"] == "gated" and row["gx_success"] is True
    assert row["gx_result"]["success"] is True and len(row["gx_result"]["checks"]) == len(CHECK_NAMES)

    published_at = publish_release(engine, RELEASE)
    row = release_row(engine)
    assert row["status"] == "published" and row["published_at"] == published_at
    # Re-running the tail of the DAG changes nothing on a published release.
    assert publish_release(engine, RELEASE) == published_at
    assert apply_gate(engine, RELEASE, run_release_gate(engine, RELEASE, CONFIG)) == "published"
    assert release_row(engine)["status"] == "published"


def _v2(engine):
    execute(engine, "UPDATE deepscholar.release_queries SET version = 2 WHERE arxiv_id = :a", a=QUERY_A)


def _bad_id(engine):
    # Ids are stored version-less and without a prefix; anything else breaks the joins downstream.
    with engine.begin() as conn:
        add_query(conn, RELEASE, "arXiv:2506.01003")


def _outside_window(engine):
    # The window is half-open: the first instant of July belongs to the next release.
    execute(engine, "UPDATE deepscholar.release_queries SET published = '2025-07-01T00:00:00Z' "
                    "WHERE arxiv_id = :a", a=QUERY_B)


def _no_venue(engine):
    execute(engine, "UPDATE deepscholar.release_queries SET venue = NULL WHERE arxiv_id = :a", a=QUERY_A)


def _too_many_words(engine):
    execute(engine, "UPDATE deepscholar.release_queries SET word_count = 1001 WHERE arxiv_id = :a", a=QUERY_A)


def _too_few_references(engine):
    execute(engine, "UPDATE deepscholar.release_queries SET n_cite_keys = 4 WHERE arxiv_id = :a", a=QUERY_A)


def _no_important_arxiv_reference(engine):
    # Important but unresolved, and resolved but unimportant: neither counts.
    execute(engine, "UPDATE deepscholar.exemplar_references SET is_important = false WHERE arxiv_id = :a "
                    "AND cite_key <> 'k0'", a=QUERY_A)
    execute(engine, "UPDATE deepscholar.exemplar_references SET resolved_arxiv_id = NULL, openalex_id = 'W1' "
                    "WHERE arxiv_id = :a AND cite_key = 'k0'", a=QUERY_A)


def _low_resolution_rate(engine):
    # 2 of 12 references stay resolved (one important per query, so that check still passes).
    execute(engine, "UPDATE deepscholar.exemplar_references SET resolved_arxiv_id = NULL, openalex_id = NULL "
                    "WHERE cite_key <> 'k0'")


def _negative_cited_by(engine):
    execute(engine, "UPDATE deepscholar.exemplar_references SET cited_by_count = -1 WHERE arxiv_id = :a "
                    "AND cite_key = 'k3'", a=QUERY_B)


def _no_nuggets(engine):
    execute(engine, "DELETE FROM deepscholar.nuggets WHERE arxiv_id = :a", a=QUERY_B)


def _blank_nugget(engine):
    execute(engine, "UPDATE deepscholar.nuggets SET text = '   ' WHERE arxiv_id = :a AND nugget_idx = 1", a=QUERY_B)


def _bad_nugget_label(engine):
    execute(engine, "UPDATE deepscholar.nuggets SET importance = 'essential' WHERE arxiv_id = :a "
                    "AND nugget_idx = 0", a=QUERY_A)


def _already_in_earlier_release(engine):
    with engine.begin() as conn:
        add_release(conn, "2025-05", window=(datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 6, 1, tzinfo=UTC)),
                    status="published")
        add_query(conn, "2025-05", QUERY_B, published=datetime(2025, 5, 20, tzinfo=UTC))


BROKEN = {
    "v2_id": (_v2, "version_is_v1"),
    "bad_id_format": (_bad_id, "arxiv_id_format"),
    "outside_window": (_outside_window, "published_in_window"),
    "no_venue": (_no_venue, "venue_present"),
    "too_many_words": (_too_many_words, "word_count_in_range"),
    "too_few_references": (_too_few_references, "min_references"),
    "no_important_arxiv_reference": (_no_important_arxiv_reference, "important_arxiv_reference_per_query"),
    "low_resolution_rate": (_low_resolution_rate, "resolution_rate"),
    "negative_cited_by": (_negative_cited_by, "cited_by_count_non_negative"),
    "no_nuggets": (_no_nuggets, "nuggets_per_query"),
    "blank_nugget_text": (_blank_nugget, "nugget_text_non_empty"),
    "bad_nugget_label": (_bad_nugget_label, "nugget_importance_label"),
    "already_in_earlier_release": (_already_in_earlier_release, "no_duplicate_across_releases"),
}


@pytest.mark.parametrize("variant", list(BROKEN))
def test_broken_release_fails_exactly_its_check(engine, request, variant):
    breaker, expected = BROKEN[variant]
    if variant == "bad_nugget_label":
        request.getfixturevalue("nugget_label_check_dropped")
    build_good_release(engine)
    breaker(engine)
    counts_before = db.row_counts(engine)

    result = run_release_gate(engine, RELEASE, CONFIG)
    assert not result.success
    assert result.failed_checks == [expected], result.summary
    failed = next(c for c in result.checks if c["name"] == expected)
    assert failed["details"], "a failed check must say what broke it"

    assert apply_gate(engine, RELEASE, result) == "failed"
    row = release_row(engine)
    assert row["status"] == "failed" and row["gx_success"] is False
    stored = {c["name"]: c["success"] for c in row["gx_result"]["checks"]}
    assert stored[expected] is False and sum(not ok for ok in stored.values()) == 1
    assert expected in row["error"]
    assert db.row_counts(engine) == counts_before, "a failed release keeps its rows"
    with pytest.raises(ReleaseNotGated):
        publish_release(engine, RELEASE)
    assert release_row(engine)["status"] == "failed"


def test_offending_rows_are_named(engine):
    build_good_release(engine)
    _already_in_earlier_release(engine)
    result = run_release_gate(engine, RELEASE, CONFIG)
    dup = next(c for c in result.checks if c["name"] == "no_duplicate_across_releases")
    assert dup["details"]["unexpected_rows"] == [{"arxiv_id": QUERY_B, "other_releases": "2025-05",
                                                  "n_other_releases": 1}]
    json.loads(result.to_json())  # storable as is


def test_empty_release_fails(engine):
    with engine.begin() as conn:
        add_release(conn, RELEASE)
    result = run_release_gate(engine, RELEASE, CONFIG)
    # No references means a resolution rate of 0, not a vacuous pass.
    assert set(result.failed_checks) == {"queries_present", "resolution_rate"}


def test_release_config_is_the_default_and_can_be_overridden(engine):
    build_good_release(engine)
    execute(engine, "UPDATE deepscholar.releases SET config = CAST(:c AS jsonb)",
            c=json.dumps(ReleaseSpec(max_words=200).to_dict()))
    assert run_release_gate(engine, RELEASE).failed_checks == ["word_count_in_range"]
    assert run_release_gate(engine, RELEASE, CONFIG).success
    assert run_release_gate(engine, RELEASE, ReleaseSpec(require_venue=False, min_references=7)).failed_checks == [
        "min_references"]


def test_official_release_skips_window_and_venue(engine):
    with engine.begin() as conn:
        add_release(conn, "official-2025", source="official", config={"source": "official_import"})
        add_query(conn, "official-2025", QUERY_A, published=datetime(2025, 4, 2, tzinfo=UTC), venue=None)
    result = run_release_gate(engine, "official-2025")
    assert result.success, result.summary
    skipped = {c["name"] for c in result.checks if c.get("skipped")}
    assert skipped == {"published_in_window", "venue_present"}


def test_pipeline_release_without_window_fails(engine):
    build_good_release(engine)
    execute(engine, "UPDATE deepscholar.releases SET window_start = NULL")
    assert run_release_gate(engine, RELEASE, CONFIG).failed_checks == ["published_in_window"]
