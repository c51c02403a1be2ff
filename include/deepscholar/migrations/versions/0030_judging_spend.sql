-- What a month's judging was predicted to cost before it was sent, and what it cost, by transport.

-- The estimate a benchmark run (or `deepscholar evaluate`) made before its first judge request: the pending
-- work priced at the transport's rate (evaluation/budget.py). One row per run; a retried estimate replaces it.
CREATE TABLE deepscholar.judging_estimates (
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_config     text NOT NULL,
    run_id           text NOT NULL,   -- the Airflow run id, or 'cli:<time>' for `deepscholar evaluate`
    transport        text NOT NULL CHECK (transport IN ('direct', 'batch')),
    predicted_calls  double precision NOT NULL,
    predicted_usd    numeric,         -- NULL: a model it needs has no price
    spent_before_usd numeric NOT NULL,
    budget_usd       numeric,         -- NULL: no budget
    needs_approval   boolean NOT NULL,
    estimated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config, run_id)
);
CREATE INDEX judging_estimates_latest_idx ON deepscholar.judging_estimates (release_id, judge_config, estimated_at);

-- The month's distinct judge requests under one judge by how they were sent ('direct', 'openai-batch'), as of
-- the board's roll-up: their cost, and what the same tokens cost at the direct price (the batch saving is
-- the difference). NULL costs: a model without a price.
CREATE TABLE deepscholar.month_judging_spend (
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    judge_config     text NOT NULL,
    transport        text NOT NULL,
    requests         integer NOT NULL,
    prompt_tokens    bigint,
    completion_tokens bigint,
    cost_usd         numeric,
    direct_price_usd numeric,
    computed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config, transport)
);
