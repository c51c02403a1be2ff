-- Human labels for judge validation (docs/ARCHITECTURE.md, "Judge validation").
--
-- An annotation item is one question a human can answer about one judged item of one report (or one
-- sub-item of a batch-judged item: AnnotationUnit in evaluation/base.py). It is independent of the judge:
-- every judge config that judged (report, metric, item_key) answered the same question, so human labels
-- validate each of them. `item_id` is stable and opaque (a hash of report, metric, item key and sub key).
CREATE TABLE deepscholar.annotation_items (
    item_id          text PRIMARY KEY,
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    report_id        bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    metric           text NOT NULL,
    item_key         text NOT NULL,             -- judgments.item_key
    sub_key          text NOT NULL DEFAULT '',  -- '' whole item; else the sub-item's position in the batch
    question         text NOT NULL,
    allowed_labels   text[] NOT NULL CHECK (cardinality(allowed_labels) >= 2),
    content          jsonb NOT NULL,            -- what the annotator reads (query title/abstract included)
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (report_id, metric, item_key, sub_key)
);
CREATE INDEX annotation_items_release ON deepscholar.annotation_items (release_id, metric);

-- One `deepscholar annotate export`: which items it drew, for which judge config, from which seed, when.
CREATE TABLE deepscholar.annotation_samples (
    sample_id     bigserial PRIMARY KEY,
    release_id    text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    metric        text NOT NULL,
    judge_config  text NOT NULL,
    n_requested   integer NOT NULL CHECK (n_requested > 0),
    seed          bigint NOT NULL,
    n_items       integer NOT NULL CHECK (n_items >= 0),
    out_files     text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE deepscholar.annotation_sample_items (
    sample_id     bigint NOT NULL REFERENCES deepscholar.annotation_samples (sample_id) ON DELETE CASCADE,
    item_id       text NOT NULL REFERENCES deepscholar.annotation_items (item_id) ON DELETE CASCADE,
    position      integer NOT NULL,             -- row order in the file
    judge_label   text,                         -- the judge's answer when sampled (never written to the file)
    PRIMARY KEY (sample_id, item_id)
);

-- The current label of each annotator on each item: relabelling replaces one's own label only.
CREATE TABLE deepscholar.human_labels (
    item_id       text NOT NULL REFERENCES deepscholar.annotation_items (item_id) ON DELETE CASCADE,
    annotator     text NOT NULL CHECK (annotator <> ''),
    label         text NOT NULL,
    source_file   text,
    labelled_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (item_id, annotator)
);
-- Every label ever imported, the replaced ones too (replaced_at set when a newer import replaced it).
CREATE TABLE deepscholar.human_label_history (
    history_id    bigserial PRIMARY KEY,
    item_id       text NOT NULL REFERENCES deepscholar.annotation_items (item_id) ON DELETE CASCADE,
    annotator     text NOT NULL,
    label         text NOT NULL,
    source_file   text,
    labelled_at   timestamptz NOT NULL DEFAULT now(),
    replaced_at   timestamptz
);
CREATE INDEX human_label_history_item ON deepscholar.human_label_history (item_id, annotator);

COMMENT ON TABLE deepscholar.human_labels IS
    'Current human label per (annotation item, annotator); all imports, replaced ones too: human_label_history';
