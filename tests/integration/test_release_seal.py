"""Published means immutable (migration 0016, release/versions.py): a sealed release's rows refuse every
change whatever the writer, its manifest hash is a function of its rows only, and readers resolve a month to
its current version."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.warehouse import one_query_release

from deepscholar import db
from deepscholar.release.versions import (
    ReleaseSealed,
    latest_version,
    manifest_hash,
    open_next_version,
    refuse_sealed,
    resolve_release,
    seal,
)
from deepscholar.scheduling import current_release

MONTH = "2025-05"
QUERY = "2505.00001"


def _release(conn, release_id: str = MONTH, status: str = "gated") -> None:
    one_query_release(conn, release_id, QUERY)
    conn.execute(sa.text("UPDATE releases SET status = :s WHERE release_id = :r"), {"s": status, "r": release_id})
    db.upsert(conn, "exemplar_references", [{"release_id": release_id, "arxiv_id": QUERY, "cite_key": "smith2020",
                                             "bib_title": "Old", "cited_by_count": 12}],
              key=["release_id", "arxiv_id", "cite_key"])
    db.upsert(conn, "nuggets", [{"release_id": release_id, "arxiv_id": QUERY, "nugget_idx": i, "text": f"fact {i}",
                                 "importance": "vital", "judge_config": "local:m:v1"} for i in range(2)],
              key=["release_id", "arxiv_id", "nugget_idx"])


WRITES = {
    "update query": "UPDATE release_queries SET title = 'changed' WHERE release_id = :r",
    "insert query": "INSERT INTO release_queries (release_id, arxiv_id, title, abstract, section_raw_latex, "
                    "section_text, word_count) VALUES (:r, '2505.00002', 'Q', 'A', 'x', 'x', 1)",
    "delete query": "DELETE FROM release_queries WHERE release_id = :r",
    "update reference": "UPDATE exemplar_references SET is_important = true WHERE release_id = :r",
    "insert reference": "INSERT INTO exemplar_references (release_id, arxiv_id, cite_key) VALUES (:r, '2505.00001', 'k2')",
    "delete reference": "DELETE FROM exemplar_references WHERE release_id = :r",
    "update nugget": "UPDATE nuggets SET text = 'other' WHERE release_id = :r AND nugget_idx = 0",
    "insert nugget": "INSERT INTO nuggets (release_id, arxiv_id, nugget_idx, text, importance, judge_config) "
                     "VALUES (:r, '2505.00001', 9, 'new', 'okay', 'local:m:v1')",
    "delete nugget": "DELETE FROM nuggets WHERE release_id = :r",
    "unpublish": "UPDATE releases SET status = 'building' WHERE release_id = :r",
    "rehash": "UPDATE releases SET manifest_hash = 'x' WHERE release_id = :r",
    "reconfigure": "UPDATE releases SET config = '{\"judge\": \"x\"}' WHERE release_id = :r",
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_sealed_release_refuses_every_change_and_says_which(engine, write):
    with engine.begin() as conn:
        _release(conn)
        sealed = seal(conn, MONTH)
    with pytest.raises(sa.exc.IntegrityError) as raised, engine.begin() as conn:
        conn.execute(sa.text(write), {"r": MONTH})
    message = str(raised.value.orig)
    assert f"release {MONTH} is published and sealed (manifest {sealed['manifest_hash'][:12]})" in message
    # What our own code raises instead: one line naming the release and the way out.
    with pytest.raises(ReleaseSealed) as clear, refuse_sealed(MONTH), engine.begin() as conn:
        conn.execute(sa.text(write), {"r": MONTH})
    assert "a correction is a new version" in str(clear.value) and "\n" not in str(clear.value)
    with engine.connect() as conn:
        assert manifest_hash(conn, MONTH) == sealed["manifest_hash"]


def test_an_unsealed_release_is_writable_and_counts_and_deletion_stay_possible(engine):
    with engine.begin() as conn:
        _release(conn, status="published")  # published without a hash (as test fixtures write): not sealed
        for _name, write in sorted(WRITES.items(), key=lambda item: item[0] == "delete query"):  # FK: last
            conn.execute(sa.text(write), {"r": MONTH})
    with engine.begin() as conn:
        _release(conn, "2025-04")
        seal(conn, "2025-04")
        conn.execute(sa.text("UPDATE releases SET counts = '{\"n\": 1}' WHERE release_id = '2025-04'"))
        conn.execute(sa.text("DELETE FROM releases WHERE release_id = '2025-04'"))  # cascades
        assert conn.execute(sa.text("SELECT count(*) FROM nuggets WHERE release_id = '2025-04'")).scalar() == 0


def test_the_manifest_hash_ignores_the_time_zone_and_sees_one_nugget(engine):
    with engine.begin() as conn:
        _release(conn)
        conn.execute(sa.text("UPDATE release_queries SET published = '2025-05-03 10:00+00' WHERE release_id = :r"),
                     {"r": MONTH})
    hashes = set()
    for zone in ("UTC", "America/Los_Angeles", "Asia/Kolkata"):
        with engine.begin() as conn:
            conn.execute(sa.text(f"SET LOCAL TimeZone = '{zone}'"))
            hashes.add(manifest_hash(conn, MONTH))
    assert len(hashes) == 1
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE nuggets SET text = 'fact 0.' WHERE release_id = :r AND nugget_idx = 0"),
                     {"r": MONTH})
        assert manifest_hash(conn, MONTH) not in hashes


def test_a_month_resolves_to_its_latest_published_version(engine):
    with engine.connect() as conn:
        assert resolve_release(conn, MONTH) == MONTH  # nothing built: the name itself
    with engine.begin() as conn:
        _release(conn)
        assert resolve_release(conn, MONTH) == MONTH  # only an unpublished version: that one
        seal(conn, MONTH)
        v2 = open_next_version(conn, latest_version(conn, MONTH), "typo in a nugget", {"source": "pipeline"})
    assert v2 == f"{MONTH}.v2"
    assert current_release(engine, MONTH) == MONTH  # v2 is building: the published v1 stays current
    with engine.begin() as conn:
        _release(conn, v2)
        conn.execute(sa.text("UPDATE nuggets SET text = 'fact 0, fixed' WHERE release_id = :r AND nugget_idx = 0"),
                     {"r": v2})
        sealed = seal(conn, v2)
        log = conn.execute(sa.text("SELECT * FROM release_changelog WHERE release_id = :r"), {"r": v2}).mappings().one()
        versions = conn.execute(sa.text("SELECT release_id, is_current FROM release_versions ORDER BY version")).all()
    assert current_release(engine, MONTH) == v2
    with engine.connect() as conn:
        assert resolve_release(conn, f"{MONTH}.v1") == MONTH and resolve_release(conn, v2) == v2
    assert (log["previous_release"], log["reason"], log["version"]) == (MONTH, "typo in a nugget", 2)
    assert log["changes"].startswith("0 queries added, 0 removed, 1 changed") and log["published_at"] is not None
    assert dict(log["details"]) == {"added": [], "removed": [], "changed": [QUERY]}
    assert sealed["changes"] == log["changes"]
    assert [tuple(v) for v in versions] == [(MONTH, False), (v2, True)]
