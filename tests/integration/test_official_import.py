"""Importing the published DeepScholar-bench slice (../shared/fixtures) as a release.

Expected values are read from the fixture files with the csv/json modules, independently of the
importer's pandas parsing, so the test checks the mapping rather than restating the data.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.release.official_import import arxiv_id_from_link, import_official
from deepscholar.text import strip_arxiv_version
from deepscholar.text.markers import cite_keys_in_marker_text

RELEASE = "deepscholar-bench-2025-q2"


@pytest.fixture
def official_dir(shared_fixtures) -> Path:
    return shared_fixtures / "deepscholar_official"


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def versionless(arxiv_id: str) -> str:
    return strip_arxiv_version(arxiv_id)[0]


def query(engine, sql, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def test_import_keys_everything_by_arxiv_id(engine, official_dir):
    papers = csv_rows(official_dir / "dataset" / "papers_with_related_works.csv")
    citations = csv_rows(official_dir / "dataset" / "recovered_citations.csv")
    expected_order = [versionless(r["arxiv_id"]) for r in papers]
    assert len(expected_order) == 5

    summary = import_official(engine, official_dir, RELEASE)
    assert summary.n_errors == 0, summary.errors
    assert (summary.n_queries, summary.n_references) == (5, len(citations))
    assert summary.citations_file == "recovered_citations.csv" and summary.important_file is None

    rows = query(engine, "SELECT arxiv_id, version, row_index FROM deepscholar.release_queries "
                         "WHERE release_id = :r ORDER BY row_index", r=RELEASE)
    assert [r.arxiv_id for r in rows] == expected_order
    assert [r.row_index for r in rows] == list(range(5))
    assert {r.version for r in rows} == {1}

    refs_expected = Counter(versionless(r["parent_paper_arxiv_id"]) for r in citations)
    refs = dict(query(engine, "SELECT arxiv_id, count(*) FROM deepscholar.exemplar_references "
                              "WHERE release_id = :r GROUP BY arxiv_id", r=RELEASE))
    assert refs == dict(refs_expected)

    nuggets_expected = {
        versionless(p.stem): len(json.loads(p.read_text())["nuggets"])
        for p in (official_dir / "nuggets").glob("*.json")
    }
    nuggets = dict(query(engine, "SELECT arxiv_id, count(*) FROM deepscholar.nuggets WHERE release_id = :r "
                                 "GROUP BY arxiv_id", r=RELEASE))
    assert nuggets == nuggets_expected
    assert {j for (j,) in query(engine, "SELECT DISTINCT judge_config FROM deepscholar.nuggets")} == {
        "official:gpt-4.1"}

    release = query(engine, "SELECT source, status, published_at, window_start, window_end, config "
                            "FROM deepscholar.releases WHERE release_id = :r", r=RELEASE)[0]
    assert (release.source, release.status) == ("official", "published")
    assert release.published_at is not None
    published = query(engine, "SELECT min(published), max(published) FROM deepscholar.release_queries")[0]
    assert release.window_start <= published[0] and published[1] < release.window_end
    assert release.config["source_dir"] == str(official_dir.resolve())


def test_sections_references_and_corpus(engine, official_dir):
    citations = csv_rows(official_dir / "dataset" / "recovered_citations.csv")
    import_official(engine, official_dir, RELEASE)

    # The cleaned section's citation markers name exactly the citation keys of its references.
    keys_by_query: dict[str, set[str]] = {}
    for r in citations:
        keys_by_query.setdefault(versionless(r["parent_paper_arxiv_id"]), set()).add(r["citation_shorthand"])
    for arxiv_id, text, raw, n_keys, words in query(
            engine, "SELECT arxiv_id, section_text, section_raw_latex, n_cite_keys, word_count "
                    "FROM deepscholar.release_queries"):
        assert "\\cite" not in text and "\\cite" in raw
        assert set(cite_keys_in_marker_text(text)) == keys_by_query[arxiv_id]
        assert n_keys == len(keys_by_query[arxiv_id])
        assert 0 < words < len(text.split()) + 1

    linked = {(versionless(r["parent_paper_arxiv_id"]), r["citation_shorthand"]): r["cited_paper_arxiv_link"]
              for r in citations}
    refs = query(engine, "SELECT arxiv_id, cite_key, resolved_arxiv_id, resolution_method, is_important "
                         "FROM deepscholar.exemplar_references")
    for arxiv_id, key, resolved, method, important in refs:
        link = linked[(arxiv_id, key)]
        assert resolved == (arxiv_id_from_link(link)[0] if link else None)
        assert resolved is None or "v" not in resolved
        assert method == "official" and important is None

    cited_ids = {arxiv_id_from_link(r["cited_paper_arxiv_link"])[0] for r in citations if r["cited_paper_arxiv_link"]}
    corpus = dict(query(engine, "SELECT arxiv_id, source FROM deepscholar.corpus"))
    assert set(corpus) == cited_ids | {r[0] for r in query(engine, "SELECT arxiv_id FROM deepscholar.papers")}
    assert set(corpus.values()) == {"official_import"}


def test_second_import_changes_no_row_count(engine, official_dir):
    import_official(engine, official_dir, RELEASE)
    before = db.row_counts(engine)
    summary = import_official(engine, official_dir, RELEASE)
    assert db.row_counts(engine) == before
    assert summary.n_errors == 0 and summary.n_queries == 5


def test_bad_rows_are_recorded_and_the_rest_imported(engine, official_dir, tmp_path):
    work = tmp_path / "official"
    shutil.copytree(official_dir / "dataset", work / "dataset")
    shutil.copytree(official_dir / "nuggets", work / "nuggets")
    papers_path = work / "dataset" / "papers_with_related_works.csv"
    papers = csv_rows(papers_path)
    bad = dict(papers[0], arxiv_id="not-an-id")
    write_csv(papers_path, [*papers, bad])
    cites_path = work / "dataset" / "recovered_citations.csv"
    cites = csv_rows(cites_path)
    write_csv(cites_path, [*cites, dict(cites[0], parent_paper_arxiv_id="2599.99999v1")])
    # A nugget file whose qid names another paper (the authors' numbering pitfall) is refused.
    victim = versionless(papers[1]["arxiv_id"])
    nugget_path = work / "nuggets" / f"{papers[1]['arxiv_id']}.json"
    data = json.loads(nugget_path.read_text())
    nugget_path.write_text(json.dumps(dict(data, qid=papers[2]["arxiv_id"])))

    summary = import_official(engine, work, RELEASE)
    assert summary.n_errors == 3, summary.errors
    assert {e["file"] for e in summary.errors} == {"papers_with_related_works.csv", "recovered_citations.csv",
                                                   nugget_path.name}
    assert summary.n_queries == 5 and summary.n_references == len(cites)
    nuggets = dict(query(engine, "SELECT arxiv_id, count(*) FROM deepscholar.nuggets GROUP BY arxiv_id"))
    assert victim not in nuggets and len(nuggets) == 4
    counts = query(engine, "SELECT counts FROM deepscholar.releases WHERE release_id = :r", r=RELEASE)[0][0]
    assert counts["n_errors"] == 3


def test_importance_labels_from_important_citations(engine, official_dir, tmp_path):
    work = tmp_path / "official"
    shutil.copytree(official_dir / "dataset", work / "dataset")
    cites = csv_rows(work / "dataset" / "recovered_citations.csv")
    first = cites[0]
    write_csv(work / "dataset" / "important_citations.csv", [
        {"parent_paper_arxiv_id": first["parent_paper_arxiv_id"], "citation_shorthand": first["citation_shorthand"],
         "is_important": "True"},
        {"parent_paper_arxiv_id": cites[1]["parent_paper_arxiv_id"], "citation_shorthand": cites[1]["citation_shorthand"],
         "is_important": "False"},
    ])
    summary = import_official(engine, work, RELEASE)
    assert summary.important_file == "important_citations.csv" and summary.n_important_labels == 1
    labels = Counter(important for (important,) in query(
        engine, "SELECT is_important FROM deepscholar.exemplar_references"))
    assert labels == {True: 1, False: len(cites) - 1}
    assert summary.n_nuggets == 0  # no nuggets/ folder here: imported without them


def write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _release_rows(engine) -> list[tuple]:
    return query(engine, "SELECT release_id, base_id, version, status, manifest_hash FROM deepscholar.releases "
                         "ORDER BY version")


def test_reimporting_the_same_content_changes_nothing_and_changed_content_is_the_next_version(
        engine, official_dir, tmp_path):
    first = import_official(engine, official_dir, RELEASE)
    assert (first.version, first.unchanged) == (1, False) and first.manifest_hash
    sealed = _release_rows(engine)
    assert sealed == [(RELEASE, RELEASE, 1, "published", first.manifest_hash)]

    again = import_official(engine, official_dir, RELEASE)
    assert again.unchanged and again.release_id == RELEASE and "nothing changed" in again.note
    assert _release_rows(engine) == sealed
    assert query(engine, "SELECT count(*) FROM deepscholar.release_changelog")[0][0] == 0

    work = tmp_path / "official"
    shutil.copytree(official_dir, work)
    nugget_path = sorted((work / "nuggets").glob("*.json"))[0]
    data = json.loads(nugget_path.read_text())
    data["nuggets"][0]["text"] = data["nuggets"][0]["text"] + " (corrected)"
    nugget_path.write_text(json.dumps(data))
    changed = import_official(engine, work, RELEASE)
    assert (changed.release_id, changed.version, changed.unchanged) == (f"{RELEASE}.v2", 2, False)
    assert changed.note.startswith("0 queries added, 0 removed, 1 changed")
    assert _release_rows(engine)[0] == sealed[0]  # the first version is untouched
    log = query(engine, "SELECT previous_release, reason, details FROM deepscholar.release_changelog")
    assert [(r.previous_release, r.reason) for r in log] == [(RELEASE, f"re-import of {work.resolve()}")]
    assert len(log[0].details["changed"]) == 1
