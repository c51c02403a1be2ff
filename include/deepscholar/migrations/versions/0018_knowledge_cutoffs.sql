-- Which systems could have seen a month's papers (docs/ARCHITECTURE.md, "Knowledge cutoffs").
--
-- A system's registration records its model's knowledge cutoff (a date; NULL when not given). On a month
-- whose queries were published on or before that date the system may have read the papers and their related
-- work during training: its row is shown on every board of the month but not ranked (rank NULL), with
-- contamination 'may_have_seen'. A system whose kind uses a model but whose cutoff is unknown is ranked and
-- marked 'cutoff_unknown'. Boards record the cutoff they were computed with, so a corrected cutoff is a new
-- board version.

ALTER TABLE deepscholar.systems
    ADD COLUMN knowledge_cutoff date,
    ADD COLUMN model_knowledge boolean NOT NULL DEFAULT true;
COMMENT ON COLUMN deepscholar.systems.knowledge_cutoff IS
    'Last day of its model''s training data; NULL: not given (unknown, when model_knowledge)';
COMMENT ON COLUMN deepscholar.systems.model_knowledge IS
    'Whether its kind writes from a model''s training (System.uses_model_knowledge); false: no cutoff applies';
-- The kinds that write from no model's training (the library sets the flag from the kind at registration).
UPDATE deepscholar.systems SET model_knowledge = false WHERE kind IN ('extractive', 'oracle', 'human_exemplar');

ALTER TABLE deepscholar.leaderboard_systems
    ADD COLUMN knowledge_cutoff date,
    ADD COLUMN contamination text CHECK (contamination IN ('may_have_seen', 'cutoff_unknown')),
    ALTER COLUMN rank DROP NOT NULL,
    ADD CONSTRAINT leaderboard_systems_unranked_check CHECK ((rank IS NULL) = (contamination = 'may_have_seen'
                                                                              AND contamination IS NOT NULL));

ALTER TABLE deepscholar.track_boards
    ADD COLUMN knowledge_cutoff date,
    ADD COLUMN contamination text CHECK (contamination IN ('may_have_seen', 'cutoff_unknown')),
    ALTER COLUMN rank DROP NOT NULL,
    ADD CONSTRAINT track_boards_unranked_check CHECK ((rank IS NULL) = (contamination = 'may_have_seen'
                                                                        AND contamination IS NOT NULL));

-- The track views select b.* columns by name: re-created with the new ones.
DROP VIEW IF EXISTS deepscholar.track_leaderboard;
CREATE VIEW deepscholar.track_leaderboard AS
SELECT b.release_id, b.judge_config, b.family, b.rank, b.system_id, b.ranking_metric, m.metric, m.dimension,
       m.metric_position, m.variant, m.metric_version, m.mean, m.n, m.n_unscored, m.ci_low, m.ci_high,
       m.is_best, m.significant, m.p_value, b.n_queries, b.n_reports, b.n_failed, b.computed_at, b.board_version,
       b.contamination, b.knowledge_cutoff
FROM deepscholar.track_boards b
JOIN deepscholar.board_current c USING (release_id, judge_config, board_version)
JOIN deepscholar.track_board_metrics m USING (release_id, judge_config, board_version, family, system_id);
