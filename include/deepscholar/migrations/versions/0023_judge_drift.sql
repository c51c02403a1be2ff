-- The judge drift alarm (docs/ARCHITECTURE.md, "Judge validation" / "Drift alarm").
--
-- A calibration slice is a fixed set of questions (annotation units: evaluation/annotation_units.py) per
-- (judge config, metric), each with its reference label: the majority human label when the metric had
-- human labels when the slice was drawn, else the judge's own first stored answer. It is drawn once and
-- never re-drawn, so every month re-judges the same questions against the same labels, however the
-- judgments of the source release change later.
CREATE TABLE deepscholar.calibration_items (
    judge_config     text NOT NULL,
    metric           text NOT NULL,
    item_id          text NOT NULL,             -- annotation_units.item_id: judge-independent, stable
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    report_id        bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    item_key         text NOT NULL,
    sub_key          text NOT NULL DEFAULT '',
    reference_kind   text NOT NULL CHECK (reference_kind IN ('human', 'first_judgment')),
    reference_label  text NOT NULL,
    position         integer NOT NULL,          -- order within the slice
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (judge_config, metric, item_id)
);

-- One row per (month's release, judge config, metric): the slice re-judged with the cache bypassed.
CREATE TABLE deepscholar.judge_drift_checks (
    release_id          text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_config        text NOT NULL,
    metric              text NOT NULL,
    status              text NOT NULL CHECK (status IN ('checked', 'refused')),  -- refused: over the cost bound
    reference_kind      text CHECK (reference_kind IN ('human', 'first_judgment')),
    n_items             integer NOT NULL DEFAULT 0 CHECK (n_items >= 0),   -- slice questions asked again
    n_agree             integer NOT NULL DEFAULT 0 CHECK (n_agree >= 0),
    n_unscored          integer NOT NULL DEFAULT 0 CHECK (n_unscored >= 0),  -- no usable answer: disagreement
    n_missing           integer NOT NULL DEFAULT 0 CHECK (n_missing >= 0),   -- no longer askable (report changed)
    agreement           double precision CHECK (agreement BETWEEN 0 AND 1),
    previous_release_id text,
    previous_agreement  double precision,
    min_agreement       double precision NOT NULL,
    max_drop            double precision,
    tripped             boolean NOT NULL DEFAULT false,
    message             text NOT NULL,
    calls               integer NOT NULL DEFAULT 0,    -- judge calls made (replays of a retry included)
    requests            integer NOT NULL DEFAULT 0,    -- of them sent to the provider
    predicted_cost_usd  double precision,
    cost_usd            double precision,              -- of the requests sent; NULL: price unknown
    request_hashes      text[] NOT NULL DEFAULT '{}',  -- the llm_calls rows (salted keys) of this check
    checked_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config, metric)
);
CREATE INDEX judge_drift_checks_history ON deepscholar.judge_drift_checks (judge_config, metric, release_id);

COMMENT ON TABLE deepscholar.judge_drift_checks IS
    'Each month''s re-judging of a judge''s calibration slice (evaluation/drift.py); tripped blocks the board';
