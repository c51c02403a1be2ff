"""What the claims track reads per query: its ground-truth claims, made at release time
(claims/ground_truth.py, table gt_claims), one per important exemplar reference.

`QUERY_DATA` loads them with the query (judging/report_contexts.py); `gt_claims_of` is how a metric reads
them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepscholar.evaluation.metrics.registry import QueryData

if TYPE_CHECKING:
    from deepscholar.evaluation.metrics.base import QueryInfo

__all__ = ["GroundTruthClaim", "QUERY_DATA", "gt_claims_of"]

FAMILY = "claims"


@dataclass(frozen=True)
class GroundTruthClaim:
    """One ground-truth claim: an important exemplar reference and what the exemplar says about it,
    condensed at release time."""

    cite_key: str
    work_title: str | None
    work_arxiv_id: str | None
    work_doi: str | None
    connection: str


QUERY_DATA = QueryData(
    sql="SELECT arxiv_id, cite_key, work_title, work_arxiv_id, work_doi, connection FROM gt_claims "
        "WHERE {where} ORDER BY arxiv_id, cite_key",
    build=lambda rows: tuple(GroundTruthClaim(r["cite_key"], r["work_title"], r["work_arxiv_id"], r["work_doi"],
                                              r["connection"]) for r in rows))


def gt_claims_of(query: QueryInfo) -> tuple[GroundTruthClaim, ...]:
    """The query's ground-truth claims; empty until the release has the claims track's artefacts."""
    return query.family_data.get(FAMILY, ())
