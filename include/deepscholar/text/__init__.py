"""The neutral text layer: what a title, an arXiv id, a citation marker, a numbered citation and a
sentence are, defined once for sources, release building, systems and metrics.

One module a concept: `titles` (normalisation, similarity), `arxiv_ids` (id shapes, versions, finding
ids in text), `markers` (the ``[@key]`` markers of cleaned LaTeX), `citations` (``[n]`` citations and a
report's numbered reference list), `sentences` (splitting exemplar text and system reports). This
package imports nothing from the rest of deepscholar.
"""

from __future__ import annotations

from deepscholar.text.arxiv_ids import (
    ARXIV_NEW_ID_RE,
    ARXIV_OLD_ID_RE,
    arxiv_id_lower_bound_date,
    strip_arxiv_version,
)
from deepscholar.text.titles import normalise_title, title_similarity

__all__ = [
    "ARXIV_NEW_ID_RE",
    "ARXIV_OLD_ID_RE",
    "normalise_title",
    "title_similarity",
    "strip_arxiv_version",
    "arxiv_id_lower_bound_date",
]
