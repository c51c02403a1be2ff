-- Judging: per-item labels, per-report scores, and the cited-by counts of report sources frozen per release.

-- One judged item of one metric for one report (a nugget batch's labels, a source's relevance grade,
-- a (sentence, citation) pair's support, a sentence's minimal covering window, one order of the
-- pairwise organization judge). Unscored items keep their reason; they are never a silent 0.
CREATE TABLE IF NOT EXISTS deepscholar.judgments (
    report_id        bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    metric           text NOT NULL,
    judge_config     text NOT NULL,   -- local:<model>:<version> or llm:<model>[;metric=model...]
    item_key         text NOT NULL,   -- stable within (report, metric), e.g. 'nuggets:0-9', 's3:c2', 'order:AB'
    metric_version   text NOT NULL,
    label            jsonb,           -- the parsed judge answer (null when unscored)
    unscored_reason  text,
    explanation      text,
    n_calls          integer NOT NULL DEFAULT 0,  -- complete() calls behind it, cached ones included
    judged_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (report_id, metric, judge_config, item_key),
    CHECK ((label IS NULL) = (unscored_reason IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS judgments_metric_idx ON deepscholar.judgments (metric, judge_config);

-- A report's score for one metric variant (the headline and the stored alternatives).
CREATE TABLE IF NOT EXISTS deepscholar.metric_scores (
    report_id        bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    metric           text NOT NULL,
    judge_config     text NOT NULL,
    variant          text NOT NULL,
    metric_version   text NOT NULL,
    value            double precision CHECK (value >= 0 AND value <= 1),
    unscored_reason  text,
    n_items          integer NOT NULL DEFAULT 0,
    details          jsonb NOT NULL DEFAULT '{}'::jsonb,
    scored_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (report_id, metric, judge_config, variant),
    CHECK ((value IS NULL) = (unscored_reason IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS metric_scores_metric_idx ON deepscholar.metric_scores (metric, judge_config, variant);

-- OpenAlex cited-by counts of the papers reports cite, looked up once per release and frozen there,
-- so a month's document-importance scores never drift (METRICS.md).
CREATE TABLE IF NOT EXISTS deepscholar.source_cited_by (
    release_id      text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    arxiv_id        text NOT NULL,    -- version-less
    openalex_id     text,
    cited_by_count  integer,
    lookup_error    text,
    looked_up_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id)
);
