-- Pooled boards, kept once computed.
--
-- A board over a window of months or one arXiv category is the roll-up's computation over the pooled queries
-- (a bootstrap over some 2,400 queries per system at twelve months): about two seconds of a cold command on a
-- small machine, for a result that changes only when one of its months gets a new board version. The command
-- line keeps each pooled board it computes here, one row per selection, with the stamp of what it read: the
-- board versions it counted, the months' reports, queries and papers, the systems, and the code and metric
-- definitions that computed it. A reader whose stamp differs recomputes and replaces the row; a selection
-- that reads any month's live scores (a board rolled up before its scores were kept) is never kept.
--
-- A cache, never a source: deleting every row loses nothing. Rows are kept for the most recently computed
-- selections only (evaluation/boards/pooled_store.py prunes), so the table stays small whatever is asked.

CREATE TABLE deepscholar.pooled_boards (
    selection_key text PRIMARY KEY,          -- sha256 of the canonical selection below
    selection     jsonb NOT NULL,            -- releases, category, published_after, judge, family, view
    stamp         text NOT NULL,             -- sha256 of what the board was computed from
    rows_json     text NOT NULL,             -- the board's rows (plain JSON text: a mean may be NaN)
    computed_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX pooled_boards_computed_at ON deepscholar.pooled_boards (computed_at);

COMMENT ON TABLE deepscholar.pooled_boards IS
    'Pooled boards (windows, categories) as last computed, with the stamp of their inputs; a cache: safe to empty.';
