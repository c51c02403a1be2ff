-- Judge vs judge (docs/ARCHITECTURE.md, "Judge validation"): what `deepscholar judges compare` and the
-- benchmark DAG's compare_judges task store for a month judged under two judge configs. A pair is stored
-- once, in canonical order (judge_a < judge_b): deltas are b - a, a confusion's rows are judge_a's labels.

-- Per metric: the two judges' labels on the items both scored, and the metric's column on the two boards.
CREATE TABLE deepscholar.judge_comparison_metrics (
    release_id          text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_a             text NOT NULL,
    judge_b             text NOT NULL,
    metric              text NOT NULL,
    n_items             integer NOT NULL CHECK (n_items >= 0),   -- annotation units both judges scored
    percent_agreement   double precision,
    ci_low              double precision,                        -- bootstrap 95 percent interval of percent agreement
    ci_high             double precision,
    cohen_kappa         double precision,
    kappa_ci_low        double precision,
    kappa_ci_high       double precision,
    confusion           jsonb NOT NULL DEFAULT '{}',             -- judge_a label -> judge_b label -> count
    deltas              jsonb NOT NULL DEFAULT '{}',             -- system -> board mean under b - under a
    n_systems           integer NOT NULL DEFAULT 0,              -- ranked on both boards with a mean
    kendall_tau         double precision,                        -- between the two boards' means of the metric
    swaps               jsonb NOT NULL DEFAULT '[]',             -- pairs ordered differently, within_noise each
    computed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_a, judge_b, metric),
    CHECK (judge_a < judge_b)
);

-- Per pair: the core boards' headline rankings (geometric mean) at the board versions compared.
CREATE TABLE deepscholar.judge_comparisons (
    release_id          text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_a             text NOT NULL,
    judge_b             text NOT NULL,
    board_version_a     integer,
    board_version_b     integer,
    n_systems           integer NOT NULL CHECK (n_systems >= 0),
    kendall_tau         double precision,
    p_value             double precision,
    swaps               jsonb NOT NULL DEFAULT '[]',
    n_swaps             integer NOT NULL DEFAULT 0,
    n_swaps_within_noise integer NOT NULL DEFAULT 0,
    computed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_a, judge_b),
    CHECK (judge_a < judge_b)
);

COMMENT ON TABLE deepscholar.judge_comparisons IS
    'Judge vs judge on one month: Kendall tau between the two core boards, swapped pairs (judge_comparison.py)';
