"""The test warehouse's clean start, shared by the per-test `engine` fixture and module-scoped seeds."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

# Bookkeeping of the migration tool, not data: emptying it would make the next init_db re-run everything.
MIGRATION_TABLES = ("schema_files", "alembic_version")


def empty_warehouse(engine: Engine) -> Engine:
    """Truncate every data table of the deepscholar schema (the schema itself stays at its revision)."""
    with engine.begin() as conn:
        names = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'deepscholar' "
            "AND table_type = 'BASE TABLE' AND NOT (table_name = ANY(:keep))"),
            {"keep": list(MIGRATION_TABLES)}).scalars().all()
        if names:
            conn.execute(sa.text("TRUNCATE " + ", ".join(f'deepscholar."{n}"' for n in names) + " CASCADE"))
    return engine


def one_query_release(conn, release_id: str, arxiv_id: str) -> None:
    """A published release with one minimal query, for tests about what hangs off a query."""
    from deepscholar import db

    db.upsert(conn, "releases", [{"release_id": release_id, "status": "published"}], key=["release_id"])
    db.upsert(conn, "release_queries", [{
        "release_id": release_id, "arxiv_id": arxiv_id, "title": "Q", "abstract": "A", "section_raw_latex": "x",
        "section_text": "x", "word_count": 1}], key=["release_id", "arxiv_id"])
