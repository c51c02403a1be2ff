-- The per-query headline scores a board version was computed from, kept beside it by the roll-up.
--
-- A pooled board (a window of months, one arXiv category, the queries after a date) is the roll-up's own
-- computation over the queries of several months. Read from metric_scores, a twelve-month window is some
-- 340,000 score rows of seven metrics (and a scan of every month's scores), read again in every process that
-- shows it. Kept per board version, it is twelve months × systems × metrics arrays of about 200 numbers, and
-- it is exactly what each month's published board counted, not what its scores became since.
--
-- No existing table is rewritten. A board version rolled up before this revision has no arrays until its next
-- roll-up; pooled boards read such a month's scores from metric_scores as before.

-- The queries of a board version, in the order of its score arrays (sorted by arXiv id).
CREATE TABLE deepscholar.board_queries (
    release_id    text NOT NULL,
    judge_config  text NOT NULL,
    board_version integer NOT NULL,
    arxiv_ids     text[] NOT NULL,
    PRIMARY KEY (release_id, judge_config, board_version),
    FOREIGN KEY (release_id, judge_config, board_version)
        REFERENCES deepscholar.board_versions (release_id, judge_config, board_version) ON DELETE CASCADE
);

-- One system's headline scores of one metric, aligned with board_queries.arxiv_ids: NULL where it has no
-- score (no ok report of that query, or the metric was not judged), NaN where the score is unscored (counted in
-- the board's n_unscored). metric_version as the board row shows it (comma-joined when the scores mix versions).
CREATE TABLE deepscholar.board_query_scores (
    release_id     text NOT NULL,
    judge_config   text NOT NULL,
    board_version  integer NOT NULL,
    system_id      text NOT NULL,
    metric         text NOT NULL,
    metric_version text,
    scores         double precision[] NOT NULL,
    PRIMARY KEY (release_id, judge_config, board_version, system_id, metric),
    FOREIGN KEY (release_id, judge_config, board_version)
        REFERENCES deepscholar.board_queries (release_id, judge_config, board_version) ON DELETE CASCADE
);
