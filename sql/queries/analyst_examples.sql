-- Example queries over the leaderboard and the scores beneath it.
--
-- Each query starts with a `-- name: <slug>` line and a one-line description. Parameters are named
-- binds (:release_id, :judge_config, :system_id, :metric) as SQLAlchemy's text(), DBeaver and
-- deepscholar.evaluation.leaderboard.analyst_queries() read them. In psql, \set the variables and write
-- :'release_id' instead. Judge configs look like 'local:all-MiniLM-L6-v2:v1' or 'llm:openai/gpt-4o';
-- SELECT DISTINCT judge_config FROM deepscholar.leaderboard lists them.

-- name: month-leaderboard
-- One month's board in Table 2's column order, best first, with the geometric mean's 95% interval.
SELECT l.rank, l.system_id,
       round(l.organization::numeric, 3)        AS organization,
       round(l.nugget_coverage::numeric, 3)     AS nugget_coverage,
       round(l.relevance_rate::numeric, 3)      AS relevance_rate,
       round(l.reference_coverage::numeric, 3)  AS reference_coverage,
       round(l.document_importance::numeric, 3) AS document_importance,
       round(l.citation_precision::numeric, 3)  AS citation_precision,
       round(l.claim_coverage::numeric, 3)      AS claim_coverage,
       round(l.geometric_mean::numeric, 3)      AS geometric_mean,
       round(l.geometric_mean_ci_low::numeric, 3)  AS gm_ci_low,
       round(l.geometric_mean_ci_high::numeric, 3) AS gm_ci_high,
       l.n_reports, l.n_failed, l.n_queries
FROM deepscholar.leaderboard l
WHERE l.release_id = :release_id AND l.judge_config = :judge_config
ORDER BY l.rank, l.system_id;

-- name: best-system-per-metric-over-time
-- For every month and metric, the best system, its mean, and whether it beats the runner-up (p < 0.05).
SELECT lr.month, m.release_id, m.dimension, m.metric, m.system_id AS best_system,
       round(m.mean::numeric, 3) AS mean, m.n, m.significant, m.p_value, m.runner_up, m.n_pairs
FROM deepscholar.leaderboard_metrics m
JOIN deepscholar.leaderboard_releases lr ON lr.release_id = m.release_id AND lr.judge_config = m.judge_config
 AND lr.board_version = m.board_version  -- the board version readers see
WHERE m.judge_config = :judge_config AND m.is_best
ORDER BY lr.month, m.release_id, m.metric_position, m.system_id;

-- name: system-trend
-- One system across months: its seven means, geometric mean and rank, with the change since its previous month.
SELECT h.month, h.release_id, h.rank,
       h.rank - lag(h.rank) OVER w AS rank_change,
       round(h.geometric_mean::numeric, 3) AS geometric_mean,
       round((h.geometric_mean - lag(h.geometric_mean) OVER w)::numeric, 3) AS geometric_mean_change,
       round(h.organization::numeric, 3) AS organization, round(h.nugget_coverage::numeric, 3) AS nugget_coverage,
       round(h.relevance_rate::numeric, 3) AS relevance_rate,
       round(h.reference_coverage::numeric, 3) AS reference_coverage,
       round(h.document_importance::numeric, 3) AS document_importance,
       round(h.citation_precision::numeric, 3) AS citation_precision,
       round(h.claim_coverage::numeric, 3) AS claim_coverage,
       h.n_reports
FROM deepscholar.leaderboard_history h
WHERE h.system_id = :system_id AND h.judge_config = :judge_config
WINDOW w AS (ORDER BY h.month, h.release_id)
ORDER BY h.month, h.release_id;

-- name: per-query-breakdown
-- One metric for one system in one month, query by query: the headline score, or why there is none.
SELECT q.arxiv_id, q.title,
       CASE WHEN r.report_id IS NULL THEN 'no report'
            WHEN r.status = 'system_error' THEN 'system error'
            WHEN s.report_id IS NULL THEN 'not judged'
            WHEN s.value IS NULL THEN 'unscored'
            ELSE 'scored' END AS outcome,
       s.value, s.unscored_reason, s.n_items, s.metric_version, s.details, r.error AS report_error
FROM deepscholar.release_queries q
LEFT JOIN deepscholar.reports r
       ON r.release_id = q.release_id AND r.arxiv_id = q.arxiv_id AND r.system_id = :system_id
LEFT JOIN deepscholar.board_current c
       ON c.release_id = q.release_id AND c.judge_config = :judge_config
LEFT JOIN deepscholar.leaderboard_metrics lm
       ON lm.release_id = q.release_id AND lm.system_id = :system_id AND lm.judge_config = :judge_config
      AND lm.metric = :metric AND lm.board_version = c.board_version
LEFT JOIN deepscholar.metric_scores s
       ON s.report_id = r.report_id AND s.metric = :metric AND s.judge_config = :judge_config
      AND s.variant = lm.variant
WHERE q.release_id = :release_id
ORDER BY s.value NULLS FIRST, q.arxiv_id;

-- name: rank-movers
-- How each system's rank moved from one month to the next, largest moves first.
WITH moves AS (
    SELECT h.system_id, h.release_id, h.month, h.rank,
           lag(h.release_id) OVER w AS previous_release, lag(h.rank) OVER w AS previous_rank
    FROM deepscholar.leaderboard_history h
    WHERE h.judge_config = :judge_config
    WINDOW w AS (PARTITION BY h.system_id ORDER BY h.month, h.release_id)
)
SELECT system_id, previous_release, release_id, previous_rank, rank, previous_rank - rank AS places_gained
FROM moves
WHERE previous_rank IS NOT NULL
ORDER BY abs(previous_rank - rank) DESC, month, system_id;

-- name: unscored-share
-- Where the judge failed in one month: per system and metric, the share of judged queries left unscored.
SELECT m.system_id, m.metric, m.n, m.n_unscored,
       round(m.n_unscored::numeric / nullif(m.n + m.n_unscored, 0), 3) AS unscored_share
FROM deepscholar.leaderboard_metrics m
JOIN deepscholar.board_current c USING (release_id, judge_config, board_version)
WHERE m.release_id = :release_id AND m.judge_config = :judge_config AND m.n_unscored > 0
ORDER BY unscored_share DESC, m.system_id, m.metric_position;

-- name: pooled-window
-- Each system's mean of every core metric pooled over a window of months (each query of each month's current version counts once).
SELECT w.system_id, w.metric, round(w.mean::numeric, 4) AS mean, w.n, w.n_unscored, w.n_months
FROM deepscholar.leaderboard_window(CAST(:window_from AS date), CAST(:window_to AS date), :judge_config) w
WHERE w.family = 'core'
ORDER BY w.system_id, w.metric;

-- name: category-means
-- One month's core means per arXiv primary category: which systems do better in which field.
SELECT c.primary_category, c.system_id, c.metric, round(c.mean::numeric, 4) AS mean, c.n
FROM deepscholar.leaderboard_categories c
WHERE c.release_id = :release_id AND c.judge_config = :judge_config AND c.family = 'core'
ORDER BY c.primary_category, c.system_id, c.metric;
