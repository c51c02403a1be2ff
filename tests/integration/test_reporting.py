"""The release summary users read: the filter funnel must add up whatever the mix of drop reasons."""

from deepscholar import db
from deepscholar.reporting import print_release_summary, release_summary


def test_funnel_sums_every_reason_dropped_at_the_same_stage(engine, capsys):
    outcomes = [("a", "version", "skipped", "not_v1"), ("b", "section", "skipped", "no_related_work"),
                ("c", "section", "skipped", "too_many_words"), ("d", "kept", "kept", None),
                ("e", "source", "error", "HTTPError")]
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": "2025-06", "status": "building"}], key=["release_id"])
        db.upsert(conn, "papers", [{"arxiv_id": a, "version": 1, "title": a} for a, *_ in outcomes],
                  key=["arxiv_id", "version"])
        db.upsert(conn, "release_candidates", [
            {"release_id": "2025-06", "arxiv_id": a, "version": 1, "stage": st, "status": s, "reason": r}
            for a, st, s, r in outcomes], key=["release_id", "arxiv_id"])
    summary = release_summary(engine, "2025-06")
    assert summary["papers_seen"] == 5
    assert summary["dropped"] == {"not_v1": 1, "no_related_work": 1, "too_many_words": 1, "HTTPError": 1}
    print_release_summary(engine, "2025-06")
    out = capsys.readouterr().out
    assert "kept after version             4" in out
    assert "kept after source              3" in out
    assert "kept after section             1" in out
