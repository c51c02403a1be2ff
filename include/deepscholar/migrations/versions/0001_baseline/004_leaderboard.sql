-- The leaderboard: what deepscholar.evaluation.rollup.roll_up computes from metric_scores (METRICS.md "Roll-up").
-- Keyed by judge_config too, so LLM-judged and locally judged boards never mix. Re-running the roll-up on
-- unchanged scores leaves every row, computed_at included, as it was.

-- One row per (release, system, judge_config): the seven headline means, their geometric mean and the rank.
CREATE TABLE IF NOT EXISTS deepscholar.leaderboard (
    release_id              text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    system_id               text NOT NULL REFERENCES deepscholar.systems (system_id) ON DELETE CASCADE,
    judge_config            text NOT NULL,
    n_queries               integer NOT NULL CHECK (n_queries >= 0),   -- queries in the release
    n_reports               integer NOT NULL CHECK (n_reports >= 0),   -- the system's ok reports
    n_failed                integer NOT NULL CHECK (n_failed >= 0),    -- the system's system_error reports
    -- Mean over queries of each metric's headline variant; unscored queries excluded (see
    -- leaderboard_metrics.n_unscored); NULL when no query was scored. Table 2's column order.
    organization            double precision,
    nugget_coverage         double precision,
    relevance_rate          double precision,
    reference_coverage      double precision,
    document_importance     double precision,
    citation_precision      double precision,
    claim_coverage          double precision,
    geometric_mean          double precision,  -- 0 when any mean is 0, NULL when any is NULL
    geometric_mean_ci_low   double precision,  -- seeded bootstrap over the system's queries, 95 percent
    geometric_mean_ci_high  double precision,
    rank                    integer NOT NULL CHECK (rank >= 1),  -- 1 = best geometric mean; a NULL one ranks last
    metric_versions         jsonb NOT NULL DEFAULT '{}'::jsonb,  -- {metric: metric_version} of the scores used
    computed_at             timestamptz NOT NULL DEFAULT now(),  -- when the values last changed
    PRIMARY KEY (release_id, system_id, judge_config)
);
CREATE INDEX IF NOT EXISTS leaderboard_judge_idx ON deepscholar.leaderboard (judge_config, release_id);

-- The detail behind each mean: how many queries were scored, the interval, and the best-system marks.
CREATE TABLE IF NOT EXISTS deepscholar.leaderboard_metrics (
    release_id       text NOT NULL,
    system_id        text NOT NULL,
    judge_config     text NOT NULL,
    metric           text NOT NULL,
    dimension        text NOT NULL,     -- knowledge_synthesis | retrieval_quality | verifiability
    metric_position  integer NOT NULL,  -- 1..7, Table 2's column order, for ORDER BY
    variant          text NOT NULL,     -- the headline variant the mean is of
    metric_version   text,              -- comma-separated when the scores mix versions
    mean             double precision,
    n                integer NOT NULL CHECK (n >= 0),           -- scored queries
    n_unscored       integer NOT NULL CHECK (n_unscored >= 0),  -- judged but unscored (judge failure)
    ci_low           double precision,
    ci_high          double precision,
    is_best          boolean NOT NULL DEFAULT false,  -- highest mean of the release (ties: all of them)
    significant      boolean NOT NULL DEFAULT false,  -- best AND p < 0.05 against the runner-up
    p_value          double precision,  -- best row only: paired two-tailed t-test vs the runner-up
    runner_up        text,              -- best row only: the system it was tested against
    n_pairs          integer,           -- best row only: queries both systems have scored
    PRIMARY KEY (release_id, system_id, judge_config, metric),
    FOREIGN KEY (release_id, system_id, judge_config)
        REFERENCES deepscholar.leaderboard (release_id, system_id, judge_config) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS leaderboard_metrics_best_idx
    ON deepscholar.leaderboard_metrics (judge_config, metric) WHERE is_best;

-- Which releases have a leaderboard under which judge, and the month each stands for: the window's start,
-- else the month a 'YYYY-MM' id names, else when the release row was made (official imports, demos).
CREATE OR REPLACE VIEW deepscholar.leaderboard_releases AS
SELECT l.release_id,
       l.judge_config,
       date_trunc('month', coalesce(
           (r.window_start AT TIME ZONE 'UTC')::date,
           CASE WHEN l.release_id ~ '^[0-9]{4}-(0[1-9]|1[0-2])$' THEN to_date(l.release_id, 'YYYY-MM') END,
           (r.created_at AT TIME ZONE 'UTC')::date))::date AS month,
       count(*)::integer AS n_systems,
       max(l.computed_at) AS computed_at,
       count(l.geometric_mean)::integer AS n_complete  -- systems with all seven means
FROM deepscholar.leaderboard l
JOIN deepscholar.releases r ON r.release_id = l.release_id
GROUP BY l.release_id, l.judge_config, r.window_start, r.created_at;

-- Per judge_config, the rows of the latest release that has a leaderboard under it.
CREATE OR REPLACE VIEW deepscholar.leaderboard_latest AS
WITH latest AS (
    SELECT DISTINCT ON (judge_config) judge_config, release_id, month
    FROM deepscholar.leaderboard_releases
    ORDER BY judge_config, month DESC, release_id DESC
)
SELECT l.release_id, latest.month, l.system_id, l.judge_config, l.n_queries, l.n_reports, l.n_failed,
       l.organization, l.nugget_coverage, l.relevance_rate, l.reference_coverage, l.document_importance,
       l.citation_precision, l.claim_coverage,
       l.geometric_mean, l.geometric_mean_ci_low, l.geometric_mean_ci_high, l.rank, l.metric_versions,
       l.computed_at
FROM deepscholar.leaderboard l
JOIN latest ON latest.judge_config = l.judge_config AND latest.release_id = l.release_id;

-- One row per month x system x judge_config, for trends across releases.
CREATE OR REPLACE VIEW deepscholar.leaderboard_history AS
SELECT l.release_id, lr.month, l.system_id, l.judge_config,
       l.organization, l.nugget_coverage, l.relevance_rate, l.reference_coverage, l.document_importance,
       l.citation_precision, l.claim_coverage,
       l.geometric_mean, l.rank, l.n_reports
FROM deepscholar.leaderboard l
JOIN deepscholar.leaderboard_releases lr ON lr.release_id = l.release_id AND lr.judge_config = l.judge_config;
