-- Boards are versioned (docs/ARCHITECTURE.md, "Versions: releases and boards").
--
-- A board is one roll-up of a release under a judge config: the core board, every track's board and their
-- agreement. A draft board version is rewritten in place by the next roll-up; once published (the benchmark
-- DAG's publish_leaderboard, `deepscholar evaluate --publish`) it never changes again: a roll-up whose result
-- differs (a new metric version, a new system build, a system added by a backfill, another manifest) adds
-- the next version, and the old one stays queryable. Every board that exists now becomes version 1,
-- published, with nothing lost.

-- What a board version was computed from; `changes` says in one line how it differs from the version before.
CREATE TABLE deepscholar.board_versions (
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_config     text NOT NULL,
    board_version    integer NOT NULL CHECK (board_version >= 1),
    status           text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'published')),
    manifest_hash    text,                                -- the release version's manifest hash, when sealed
    judge            jsonb NOT NULL DEFAULT '{}'::jsonb,  -- board_judge(): kind, model, metric_models, params
    metric_versions  jsonb NOT NULL DEFAULT '{}'::jsonb,  -- {metric: version(s)} over every family's board
    system_builds    jsonb NOT NULL DEFAULT '{}'::jsonb,  -- board_system_builds(): {system: [builds]}
    n_systems        integer NOT NULL DEFAULT 0 CHECK (n_systems >= 0),
    changes          text,                                -- vs the version before; NULL for version 1
    created_at       timestamptz NOT NULL DEFAULT now(),
    computed_at      timestamptz NOT NULL DEFAULT now(),  -- when its rows last changed (drafts only change)
    published_at     timestamptz,
    PRIMARY KEY (release_id, judge_config, board_version),
    CHECK ((status = 'published') = (published_at IS NOT NULL))
);

-- The provenance a board version records, defined once (the roll-up calls these too).
CREATE FUNCTION deepscholar.board_judge(p_judge text) RETURNS jsonb LANGUAGE sql STABLE AS $$
SELECT coalesce((SELECT jsonb_build_object('kind', j.kind, 'model', j.model, 'metric_models', j.metric_models,
                                           'params', j.params)
                   FROM deepscholar.judge_configs j WHERE j.judge_config = p_judge), '{}'::jsonb)
$$;

CREATE FUNCTION deepscholar.board_system_builds(p_release text) RETURNS jsonb LANGUAGE sql STABLE AS $$
SELECT coalesce(jsonb_object_agg(system_id, builds), '{}'::jsonb)
FROM (SELECT system_id,
             jsonb_agg(DISTINCT coalesce(system_build, 'unknown') ORDER BY coalesce(system_build, 'unknown')) AS builds
        FROM deepscholar.reports WHERE release_id = p_release AND status = 'ok'
       GROUP BY system_id) b
$$;

-- Every (release, judge) with any board row today is version 1, published.
INSERT INTO deepscholar.board_versions
    (release_id, judge_config, board_version, status, manifest_hash, judge, metric_versions, system_builds,
     n_systems, created_at, computed_at, published_at)
SELECT b.release_id, b.judge_config, 1, 'published', r.manifest_hash, deepscholar.board_judge(b.judge_config),
       coalesce((SELECT jsonb_object_agg(v.metric, v.versions)
                   FROM (SELECT m.metric, string_agg(DISTINCT m.metric_version, ',' ORDER BY m.metric_version) AS versions
                           FROM (SELECT metric, metric_version FROM deepscholar.leaderboard_metrics
                                  WHERE release_id = b.release_id AND judge_config = b.judge_config
                                 UNION ALL
                                 SELECT metric, metric_version FROM deepscholar.track_board_metrics
                                  WHERE release_id = b.release_id AND judge_config = b.judge_config) m
                          WHERE m.metric_version IS NOT NULL
                          GROUP BY m.metric) v), '{}'::jsonb),
       deepscholar.board_system_builds(b.release_id),
       (SELECT count(*) FROM deepscholar.leaderboard_systems s
         WHERE s.release_id = b.release_id AND s.judge_config = b.judge_config),
       b.computed_at, b.computed_at, b.computed_at
FROM (SELECT release_id, judge_config, max(computed_at) AS computed_at
        FROM (SELECT release_id, judge_config, computed_at FROM deepscholar.leaderboard_systems
              UNION ALL SELECT release_id, judge_config, computed_at FROM deepscholar.track_boards
              UNION ALL SELECT release_id, judge_config, computed_at FROM deepscholar.board_agreement) a
       GROUP BY release_id, judge_config) b
JOIN deepscholar.releases r ON r.release_id = b.release_id;

-- The views over the board tables are re-created below (the generated wide ones by the revision's Python).
DROP VIEW IF EXISTS deepscholar.leaderboard_agreement;
DROP VIEW IF EXISTS deepscholar.track_leaderboard;
DROP VIEW IF EXISTS deepscholar.leaderboard_releases;

-- Every board row carries its version; existing rows are version 1.
ALTER TABLE deepscholar.leaderboard_metrics DROP CONSTRAINT leaderboard_metrics_release_id_system_id_judge_config_fkey;
ALTER TABLE deepscholar.track_board_metrics DROP CONSTRAINT track_board_metrics_release_id_judge_config_family_system__fkey;

ALTER TABLE deepscholar.leaderboard_systems ADD COLUMN board_version integer NOT NULL DEFAULT 1;
ALTER TABLE deepscholar.leaderboard_systems DROP CONSTRAINT leaderboard_systems_pkey;
ALTER TABLE deepscholar.leaderboard_systems ADD PRIMARY KEY (release_id, judge_config, board_version, system_id);
ALTER TABLE deepscholar.leaderboard_systems ADD FOREIGN KEY (release_id, judge_config, board_version)
    REFERENCES deepscholar.board_versions (release_id, judge_config, board_version) ON DELETE CASCADE;

ALTER TABLE deepscholar.leaderboard_metrics ADD COLUMN board_version integer NOT NULL DEFAULT 1;
ALTER TABLE deepscholar.leaderboard_metrics DROP CONSTRAINT leaderboard_metrics_pkey;
ALTER TABLE deepscholar.leaderboard_metrics ADD PRIMARY KEY (release_id, judge_config, board_version, system_id, metric);
ALTER TABLE deepscholar.leaderboard_metrics ADD FOREIGN KEY (release_id, judge_config, board_version, system_id)
    REFERENCES deepscholar.leaderboard_systems (release_id, judge_config, board_version, system_id) ON DELETE CASCADE;

ALTER TABLE deepscholar.track_boards ADD COLUMN board_version integer NOT NULL DEFAULT 1;
ALTER TABLE deepscholar.track_boards DROP CONSTRAINT track_boards_pkey;
ALTER TABLE deepscholar.track_boards ADD PRIMARY KEY (release_id, judge_config, board_version, family, system_id);
ALTER TABLE deepscholar.track_boards ADD FOREIGN KEY (release_id, judge_config, board_version)
    REFERENCES deepscholar.board_versions (release_id, judge_config, board_version) ON DELETE CASCADE;

ALTER TABLE deepscholar.track_board_metrics ADD COLUMN board_version integer NOT NULL DEFAULT 1;
ALTER TABLE deepscholar.track_board_metrics DROP CONSTRAINT track_board_metrics_pkey;
ALTER TABLE deepscholar.track_board_metrics
    ADD PRIMARY KEY (release_id, judge_config, board_version, family, system_id, metric);
ALTER TABLE deepscholar.track_board_metrics ADD FOREIGN KEY (release_id, judge_config, board_version, family, system_id)
    REFERENCES deepscholar.track_boards (release_id, judge_config, board_version, family, system_id) ON DELETE CASCADE;

ALTER TABLE deepscholar.board_agreement ADD COLUMN board_version integer NOT NULL DEFAULT 1;
ALTER TABLE deepscholar.board_agreement DROP CONSTRAINT board_agreement_pkey;
ALTER TABLE deepscholar.board_agreement ADD PRIMARY KEY (release_id, judge_config, board_version, family_a, family_b);
ALTER TABLE deepscholar.board_agreement ADD FOREIGN KEY (release_id, judge_config, board_version)
    REFERENCES deepscholar.board_versions (release_id, judge_config, board_version) ON DELETE CASCADE;

-- The version readers see of each (release, judge): the latest published one, else the latest draft.
CREATE VIEW deepscholar.board_current AS
SELECT DISTINCT ON (release_id, judge_config) release_id, judge_config, board_version, status, published_at
FROM deepscholar.board_versions
ORDER BY release_id, judge_config, (status = 'published') DESC, board_version DESC;

-- As before, over the version readers see (board_version added last).
CREATE VIEW deepscholar.leaderboard_releases AS
SELECT l.release_id,
       l.judge_config,
       date_trunc('month', coalesce(
           (r.window_start AT TIME ZONE 'UTC')::date,
           CASE WHEN l.release_id ~ '^[0-9]{4}-(0[1-9]|1[0-2])$' THEN to_date(l.release_id, 'YYYY-MM') END,
           (r.created_at AT TIME ZONE 'UTC')::date))::date AS month,
       count(*)::integer AS n_systems,
       max(l.computed_at) AS computed_at,
       count(l.geometric_mean)::integer AS n_complete,  -- systems with every metric's mean
       l.board_version
FROM deepscholar.leaderboard_systems l
JOIN deepscholar.board_current c USING (release_id, judge_config, board_version)
JOIN deepscholar.releases r ON r.release_id = l.release_id
GROUP BY l.release_id, l.judge_config, l.board_version, r.window_start, r.created_at;

CREATE VIEW deepscholar.leaderboard_agreement AS
SELECT a.release_id, lr.month, a.judge_config, a.family_a, a.family_b, a.n_systems, a.kendall_tau, a.p_value,
       a.movers, a.computed_at, a.board_version
FROM deepscholar.board_agreement a
JOIN deepscholar.board_current c USING (release_id, judge_config, board_version)
LEFT JOIN deepscholar.leaderboard_releases lr ON lr.release_id = a.release_id AND lr.judge_config = a.judge_config;

CREATE VIEW deepscholar.track_leaderboard AS
SELECT b.release_id, b.judge_config, b.family, b.rank, b.system_id, b.ranking_metric, m.metric, m.dimension,
       m.metric_position, m.variant, m.metric_version, m.mean, m.n, m.n_unscored, m.ci_low, m.ci_high,
       m.is_best, m.significant, m.p_value, b.n_queries, b.n_reports, b.n_failed, b.computed_at, b.board_version
FROM deepscholar.track_boards b
JOIN deepscholar.board_current c USING (release_id, judge_config, board_version)
JOIN deepscholar.track_board_metrics m USING (release_id, judge_config, board_version, family, system_id);

-- Every version of every board, with what it was computed from and how it differs from the one before.
CREATE VIEW deepscholar.leaderboard_board_versions AS
SELECT v.release_id, rel.base_id, rel.version AS release_version, v.judge_config, v.board_version, v.status,
       v.board_version = c.board_version AS is_current, v.changes, v.manifest_hash, v.judge, v.metric_versions,
       v.system_builds, v.n_systems, v.created_at, v.computed_at, v.published_at
FROM deepscholar.board_versions v
JOIN deepscholar.releases rel ON rel.release_id = v.release_id
JOIN deepscholar.board_current c ON c.release_id = v.release_id AND c.judge_config = v.judge_config;
