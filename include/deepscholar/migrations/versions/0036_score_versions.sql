-- Published numbers are never rewritten in place.
--
-- metric_scores and judgments hold each report's scores and judged items at the metric version judged last.
-- When a metric's definition or prompt changes (a new metric_version), judging the report again used to
-- overwrite those rows; the board versions computed from the old ones kept only their per-query headline
-- arrays. From this revision the judge's store moves the rows of the version it replaces into the two
-- tables below first (evaluation/judging/runner.py: store_results), so a report's score under every version
-- stays readable: the views metric_score_versions and judgment_versions show current and superseded rows
-- side by side, each with its version.
--
-- No existing table is rewritten: metric_scores and judgments keep their keys, and the new tables start
-- empty (the upgrade takes milliseconds at any size).

CREATE TABLE deepscholar.superseded_metric_scores (
    report_id        bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    metric           text NOT NULL,
    judge_config     text NOT NULL,
    variant          text NOT NULL,
    metric_version   text NOT NULL,
    value            double precision CHECK (value >= 0),
    unscored_reason  text,
    n_items          integer NOT NULL DEFAULT 0,
    details          jsonb NOT NULL DEFAULT '{}'::jsonb,
    scored_at        timestamptz NOT NULL,
    superseded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (report_id, metric, judge_config, variant, metric_version),
    CHECK ((value IS NULL) = (unscored_reason IS NOT NULL))
);

CREATE TABLE deepscholar.superseded_judgments (
    report_id        bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    metric           text NOT NULL,
    judge_config     text NOT NULL,
    item_key         text NOT NULL,
    metric_version   text NOT NULL,
    label            jsonb,
    unscored_reason  text,
    explanation      text,
    n_calls          integer NOT NULL DEFAULT 0,
    request_hashes   text[],
    judged_at        timestamptz NOT NULL,
    superseded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (report_id, metric, judge_config, item_key, metric_version),
    CHECK ((label IS NULL) = (unscored_reason IS NOT NULL))
);

-- Every version of every score: the current row (is_current) and those it replaced.
CREATE VIEW deepscholar.metric_score_versions AS
SELECT report_id, metric, judge_config, variant, metric_version, value, unscored_reason, n_items, details,
       scored_at, NULL::timestamptz AS superseded_at, true AS is_current
FROM deepscholar.metric_scores
UNION ALL
SELECT report_id, metric, judge_config, variant, metric_version, value, unscored_reason, n_items, details,
       scored_at, superseded_at, false
FROM deepscholar.superseded_metric_scores;

CREATE VIEW deepscholar.judgment_versions AS
SELECT report_id, metric, judge_config, item_key, metric_version, label, unscored_reason, explanation, n_calls,
       request_hashes, judged_at, NULL::timestamptz AS superseded_at, true AS is_current
FROM deepscholar.judgments
UNION ALL
SELECT report_id, metric, judge_config, item_key, metric_version, label, unscored_reason, explanation, n_calls,
       request_hashes, judged_at, superseded_at, false
FROM deepscholar.superseded_judgments;

-- The figures of a board version as the tracks' authors' released scorers aggregate them
-- (evaluation/boards/published.py), computed by the roll-up from the scores that version counted.
-- A board version rolled up before this revision has none until its next roll-up finds its rows unchanged.
CREATE TABLE deepscholar.board_published_figures (
    release_id      text NOT NULL,
    judge_config    text NOT NULL,
    board_version   integer NOT NULL,
    family          text NOT NULL,
    system_id       text NOT NULL,
    figure          text NOT NULL,              -- published.FIGURES' name, e.g. citation_accuracy_pooled
    value           double precision,           -- NULL: nothing to aggregate
    metric_versions text[] NOT NULL DEFAULT '{}',  -- 'metric version' of the scores it read
    computed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config, board_version, family, system_id, figure),
    FOREIGN KEY (release_id, judge_config, board_version)
        REFERENCES deepscholar.board_versions (release_id, judge_config, board_version) ON DELETE CASCADE
);
