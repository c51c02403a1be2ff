"""Boards: from stored scores to the published leaderboards, and what is checked and said about them.

Public (for the DAGs, the CLI and the page):
- `rollup`: a month's scores rolled up into every family's board (means, intervals, ranks);
- `board_versions`: a published board never changes, a different result is its next version;
- `leaderboard`: reading a stored board and printing it like the paper's Table 2;
- `leaderboard_quality`: the Great Expectations check a board passes before it is published;
- `pooled`: boards over a window of months, a category or a cutoff, computed on request;
- `selection`: which queries a pooled board is over (months, category, date), named without computing;
- `pooled_store`: pooled boards the command line computed, kept with the stamp of what they read;
- `query_scores`: the per-query scores a board version counted, kept beside it (what `pooled` reads);
- `rank_agreement`: Kendall's tau between two families' boards of a month (do the benchmarks agree?);
- `contamination`: could a system have seen a month's papers (knowledge cutoffs);
- `published`: a track's numbers aggregated as its authors' released scorer does, beside ours.

Boards stand above judging and money (the roll-up stores the month's spend through `money.costs`) and
import no judging module at all: the judge comes from `evaluation.judge_spec`.
"""

__all__ = ["board_versions", "contamination", "leaderboard", "leaderboard_quality", "pooled", "pooled_store",
           "published", "query_scores", "rank_agreement", "rollup", "selection"]
