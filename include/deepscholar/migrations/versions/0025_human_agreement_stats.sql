-- Judge vs humans, stored (docs/ARCHITECTURE.md, "Judge validation"): what the leaderboard page's "How far can
-- you trust each column" table shows, computed when human labels change (`deepscholar annotate import`) or
-- when asked (`deepscholar agreement`), never by the page. One row per month, judge config and metric: the
-- entry `human_agreement.agreement_report` returns for it, as JSON. The humans' agreement among themselves
-- inside it is computed on at most `annotators_per_item_cap` labels per item (the entry says how many items
-- had more), so the work is bounded whoever imported how many labels.
CREATE TABLE deepscholar.human_agreement_stats (
    release_id    text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_config  text NOT NULL,
    metric        text NOT NULL,
    report        jsonb NOT NULL CHECK (jsonb_typeof(report) = 'object'),
    n_labels      integer NOT NULL CHECK (n_labels >= 0),   -- human labels of the metric on the month it read
    computed_at   timestamptz NOT NULL DEFAULT now(),       -- last time the entry changed
    PRIMARY KEY (release_id, judge_config, metric)
);
