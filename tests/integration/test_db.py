"""The warehouse layer against real PostgreSQL: idempotent schema and upserts on natural keys."""

import sqlalchemy as sa

from deepscholar import db


def test_init_db_is_idempotent(engine):
    assert db.init_db(engine) == []  # the session fixture already applied every revision
    before = db.row_counts(engine)
    db.init_db(engine)
    assert db.row_counts(engine) == before


def test_upsert_updates_on_natural_key_and_never_duplicates(engine):
    row = {"arxiv_id": "2501.00001", "title": "First", "abstract": "a", "source": "test"}
    with engine.begin() as conn:
        db.upsert(conn, "corpus", [row], key=["arxiv_id"])
        db.upsert(conn, "corpus", [row | {"title": "Second"}], key=["arxiv_id"])
    with engine.connect() as conn:
        titles = conn.execute(sa.text("SELECT title FROM corpus")).scalars().all()
    assert titles == ["Second"]


def test_upsert_with_empty_update_keeps_the_first_write(engine):
    row = {"arxiv_id": "2501.00002", "title": "Frozen", "abstract": "", "source": "test"}
    with engine.begin() as conn:
        db.upsert(conn, "corpus", [row], key=["arxiv_id"], update=[])
        db.upsert(conn, "corpus", [row | {"title": "Changed"}], key=["arxiv_id"], update=[])
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT title FROM corpus")).scalar_one() == "Frozen"


def test_upsert_sends_many_rows_per_statement_and_a_repeated_key_once(engine):
    """A chunk's rows go in one statement (one per row was 34,280 round trips in a month's scores); a key
    repeated in one call is written once, the last row winning when rows update and the first when
    existing rows are kept, as if the rows had been written one after another."""
    rows = [{"arxiv_id": f"2502.{i:05d}", "title": f"T{i}", "abstract": "", "source": "test"} for i in range(300)]
    rows += [rows[0] | {"title": "updated"}]
    statements = []
    with engine.begin() as conn:
        sa.event.listen(conn, "before_cursor_execute", lambda *a: statements.append(a[2]))
        written = db.upsert(conn, "corpus", rows, key=["arxiv_id"])
        kept = db.upsert(conn, "corpus", [rows[1] | {"title": "ignored"}, rows[1] | {"title": "also ignored"}],
                         key=["arxiv_id"], update=[])
    assert len([s for s in statements if s.lstrip().upper().startswith("INSERT")]) == 2
    assert (written, kept) == (300, 0)
    with engine.connect() as conn:
        titles = dict(conn.execute(sa.text(
            "SELECT arxiv_id, title FROM corpus WHERE arxiv_id = ANY(:ids)"), {"ids": ["2502.00000", "2502.00001"]}).all())
    assert titles == {"2502.00000": "updated", "2502.00001": "T1"}


def test_corpus_full_text_search_vector_is_maintained(engine):
    with engine.begin() as conn:
        db.upsert(conn, "corpus", [{"arxiv_id": "2501.00003", "title": "Dense retrieval for question answering",
                                    "abstract": "We study retrievers.", "source": "test"}], key=["arxiv_id"])
        hit = conn.execute(sa.text(
            "SELECT arxiv_id FROM corpus WHERE search_vector @@ plainto_tsquery('english', 'retrieval')")).scalar()
    assert hit == "2501.00003"


def test_upsert_refuses_rows_with_different_columns(engine):
    import pytest

    rows = [{"arxiv_id": "a", "title": "A", "source": "t"}, {"arxiv_id": "b", "title": "B", "source": "t", "doi": "x"}]
    with engine.begin() as conn, pytest.raises(ValueError, match="same columns"):
        db.upsert(conn, "corpus", rows, key=["arxiv_id"])
