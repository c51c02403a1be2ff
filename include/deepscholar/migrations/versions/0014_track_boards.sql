-- Boards of the evaluation tracks (RACE, FACT, ReportBench, claims: docs/METRICS.md "Tracks"), beside the
-- core board and apart from it, so no track row can change a core number or a core reader's result.

-- A track can score a count (FACT's effective citations), not only a fraction: metric_scores keeps its
-- lower bound, and the [0, 1] range of every other metric is checked on its board by the GX gate
-- (evaluation/leaderboard_quality.py), which knows from the metric registry which metrics are fractions.
ALTER TABLE deepscholar.metric_scores DROP CONSTRAINT metric_scores_value_check;
ALTER TABLE deepscholar.metric_scores ADD CONSTRAINT metric_scores_value_check CHECK (value >= 0);

-- One row per (release, system, judge_config, track): the system's counts and its rank on the track's
-- board, which ranks by the track's ranking metric (RACE by race_overall, FACT by citation_accuracy, ...).
CREATE TABLE deepscholar.track_boards (
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    system_id        text NOT NULL REFERENCES deepscholar.systems (system_id) ON DELETE CASCADE,
    judge_config     text NOT NULL,
    family           text NOT NULL,     -- the track: a family of the metric registry
    n_queries        integer NOT NULL CHECK (n_queries >= 0),
    n_reports        integer NOT NULL CHECK (n_reports >= 0),
    n_failed         integer NOT NULL CHECK (n_failed >= 0),
    ranking_metric   text NOT NULL,
    rank             integer NOT NULL CHECK (rank >= 1),  -- 1 = best mean of ranking_metric; a NULL mean ranks last
    metric_versions  jsonb NOT NULL DEFAULT '{}'::jsonb,
    computed_at      timestamptz NOT NULL DEFAULT now(),  -- when the values last changed
    PRIMARY KEY (release_id, judge_config, family, system_id)
);
COMMENT ON TABLE deepscholar.track_boards IS
    'One row per (release, judge_config, track, system): rank by the track''s ranking metric. Per-metric '
    'means: track_board_metrics; side by side: the track_leaderboard view.';

-- The detail behind each mean, as leaderboard_metrics has it for the core board.
CREATE TABLE deepscholar.track_board_metrics (
    release_id       text NOT NULL,
    judge_config     text NOT NULL,
    family           text NOT NULL,
    system_id        text NOT NULL,
    metric           text NOT NULL,
    dimension        text NOT NULL,
    metric_position  integer NOT NULL,  -- column order within the track's board
    variant          text NOT NULL,
    metric_version   text,
    mean             double precision,
    n                integer NOT NULL CHECK (n >= 0),
    n_unscored       integer NOT NULL CHECK (n_unscored >= 0),
    ci_low           double precision,
    ci_high          double precision,
    is_best          boolean NOT NULL DEFAULT false,
    significant      boolean NOT NULL DEFAULT false,
    p_value          double precision,
    runner_up        text,
    n_pairs          integer,
    PRIMARY KEY (release_id, judge_config, family, system_id, metric),
    FOREIGN KEY (release_id, judge_config, family, system_id)
        REFERENCES deepscholar.track_boards (release_id, judge_config, family, system_id) ON DELETE CASCADE
);

-- Do the benchmarks agree? Per release and judge, Kendall's tau between every pair of families' headline
-- rankings (the core's geometric mean, each track's ranking metric) over the competing systems both rank.
CREATE TABLE deepscholar.board_agreement (
    release_id     text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_config   text NOT NULL,
    family_a       text NOT NULL,
    family_b       text NOT NULL,
    n_systems      integer NOT NULL CHECK (n_systems >= 0),
    kendall_tau    double precision CHECK (kendall_tau BETWEEN -1 AND 1),  -- NULL below 2 systems or no spread
    p_value        double precision,
    movers         jsonb NOT NULL DEFAULT '[]'::jsonb,  -- [{system_id, rank_a, rank_b, shift}], biggest shift first
    computed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config, family_a, family_b),
    CHECK (family_a < family_b)
);

CREATE VIEW deepscholar.leaderboard_agreement AS
SELECT a.release_id, lr.month, a.judge_config, a.family_a, a.family_b, a.n_systems, a.kendall_tau, a.p_value,
       a.movers, a.computed_at
FROM deepscholar.board_agreement a
LEFT JOIN deepscholar.leaderboard_releases lr ON lr.release_id = a.release_id AND lr.judge_config = a.judge_config;

-- Every track's board side by side, one row per (system, metric), for analysts; the per-track wide views
-- (leaderboard_<track>) are generated from the metric registry by the library (migrations/wide_views.py).
CREATE VIEW deepscholar.track_leaderboard AS
SELECT b.release_id, b.judge_config, b.family, b.rank, b.system_id, b.ranking_metric, m.metric, m.dimension,
       m.metric_position, m.variant, m.metric_version, m.mean, m.n, m.n_unscored, m.ci_low, m.ci_high,
       m.is_best, m.significant, m.p_value, b.n_queries, b.n_reports, b.n_failed, b.computed_at
FROM deepscholar.track_boards b
JOIN deepscholar.track_board_metrics m USING (release_id, judge_config, family, system_id);
