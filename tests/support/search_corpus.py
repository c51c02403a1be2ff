"""A small corpus around one query date, for the local search backends' tests: papers just before, at and
after the cutoff, an undated one, the query paper itself, and two off-topic ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from deepscholar import db

CUTOFF = datetime(2025, 6, 10, 12, 0, tzinfo=UTC)
GNN = "Graph neural networks pass messages along edges to learn node representations."


def add_papers(engine, rows: list[tuple[str, str, str, datetime | None]]) -> None:
    """(arxiv_id, title, abstract, published) rows upserted into `corpus`."""
    with engine.begin() as conn:
        db.upsert(conn, "corpus", [{"arxiv_id": a, "title": t, "abstract": ab, "published": p, "source": "test"}
                                   for a, t, ab, p in rows], key=["arxiv_id"])


def add_cutoff_corpus(engine) -> None:
    add_papers(engine, [
        ("2401.00001", "Message passing graph neural networks", GNN, datetime(2024, 1, 5, tzinfo=UTC)),
        ("2402.00002", "Over-smoothing in deep graph neural networks", GNN + " Deep stacks over-smooth.",
         datetime(2024, 2, 5, tzinfo=UTC)),
        ("2506.00003", "Graph neural networks one second early", GNN, CUTOFF - timedelta(seconds=1)),
        ("2506.00004", "Graph neural networks at the cutoff", GNN, CUTOFF),
        ("2506.00005", "Graph neural networks after the cutoff", GNN, CUTOFF + timedelta(days=3)),
        ("2506.00006", "Graph neural networks without a date", GNN, None),
        ("2506.00007", "Graph neural networks: the query paper", GNN, datetime(2025, 6, 1, tzinfo=UTC)),
        ("2301.00008", "Sequential recommendation with self-attention",
         "Recommenders predict the next item a user interacts with.", datetime(2023, 1, 2, tzinfo=UTC)),
        ("2302.00009", "Dense passage retrieval", "Dual encoders retrieve passages for question answering.",
         datetime(2023, 2, 2, tzinfo=UTC)),
    ])
