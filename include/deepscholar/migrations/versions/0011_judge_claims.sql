-- A lease on one report's judgment of one metric under one judge config, taken before its LLM work starts
-- (deepscholar/evaluation/claims.py). The holder (host:pid:uuid) renews lease_expires_at while it works
-- and deletes its rows once the chunk's results are stored; another process skips reports under a live
-- lease and takes over those whose lease ran out (their holder died). Only work in progress is here.
CREATE TABLE deepscholar.judge_claims (
    report_id         bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    metric            text NOT NULL,
    judge_config      text NOT NULL,
    holder            text NOT NULL,
    claimed_at        timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz NOT NULL,
    PRIMARY KEY (report_id, metric, judge_config)
);
CREATE INDEX judge_claims_holder ON deepscholar.judge_claims (holder);
