-- The leaderboard's storage becomes long: one row per (release, system, judge) in leaderboard_systems
-- (counts, geometric mean, rank) and one per metric in leaderboard_metrics (as before). The wide tables
-- analysts query (leaderboard, leaderboard_latest, leaderboard_history) become views over the two, with one
-- column per registered metric, re-created by the library when the metric registry changes
-- (deepscholar/migrations/wide_views.py): adding a metric needs no DDL.

DROP VIEW IF EXISTS deepscholar.leaderboard_history;
DROP VIEW IF EXISTS deepscholar.leaderboard_latest;
DROP VIEW IF EXISTS deepscholar.leaderboard_releases;

-- Every wide mean already has its leaderboard_metrics row (the roll-up writes both); a row written some
-- other way is kept rather than dropped with its column.
INSERT INTO deepscholar.leaderboard_metrics
    (release_id, system_id, judge_config, metric, dimension, metric_position, variant, metric_version, mean, n,
     n_unscored)
SELECT l.release_id, l.system_id, l.judge_config, w.metric, w.dimension, w.position, w.variant,
       l.metric_versions ->> w.metric, w.mean, 0, 0
FROM deepscholar.leaderboard l
CROSS JOIN LATERAL (VALUES
    ('organization', 'knowledge_synthesis', 1, 'score', l.organization),
    ('nugget_coverage', 'knowledge_synthesis', 2, 'strict_all', l.nugget_coverage),
    ('relevance_rate', 'retrieval_quality', 3, 'score', l.relevance_rate),
    ('reference_coverage', 'retrieval_quality', 4, 'score', l.reference_coverage),
    ('document_importance', 'retrieval_quality', 5, 'score', l.document_importance),
    ('citation_precision', 'verifiability', 6, 'per_pair', l.citation_precision),
    ('claim_coverage', 'verifiability', 7, 'w1', l.claim_coverage)
) AS w (metric, dimension, position, variant, mean)
WHERE w.mean IS NOT NULL
ON CONFLICT (release_id, system_id, judge_config, metric) DO NOTHING;

ALTER TABLE deepscholar.leaderboard RENAME TO leaderboard_systems;
ALTER INDEX deepscholar.leaderboard_pkey RENAME TO leaderboard_systems_pkey;
ALTER INDEX deepscholar.leaderboard_judge_idx RENAME TO leaderboard_systems_judge_idx;
ALTER TABLE deepscholar.leaderboard_systems
    DROP COLUMN organization,
    DROP COLUMN nugget_coverage,
    DROP COLUMN relevance_rate,
    DROP COLUMN reference_coverage,
    DROP COLUMN document_importance,
    DROP COLUMN citation_precision,
    DROP COLUMN claim_coverage;
COMMENT ON TABLE deepscholar.leaderboard_systems IS
    'One row per (release, system, judge_config): counts, geometric mean over the metrics, rank. '
    'Per-metric means: leaderboard_metrics; both side by side: the leaderboard view.';

-- Which releases have a leaderboard under which judge, and the month each stands for (as before).
CREATE VIEW deepscholar.leaderboard_releases AS
SELECT l.release_id,
       l.judge_config,
       date_trunc('month', coalesce(
           (r.window_start AT TIME ZONE 'UTC')::date,
           CASE WHEN l.release_id ~ '^[0-9]{4}-(0[1-9]|1[0-2])$' THEN to_date(l.release_id, 'YYYY-MM') END,
           (r.created_at AT TIME ZONE 'UTC')::date))::date AS month,
       count(*)::integer AS n_systems,
       max(l.computed_at) AS computed_at,
       count(l.geometric_mean)::integer AS n_complete  -- systems with every metric's mean
FROM deepscholar.leaderboard_systems l
JOIN deepscholar.releases r ON r.release_id = l.release_id
GROUP BY l.release_id, l.judge_config, r.window_start, r.created_at;
