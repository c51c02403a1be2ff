-- A month's judge requests, kept by the roll-up.
--
-- `deepscholar cost` shows a month's actual judge requests per metric, per system and per transport. They are
-- counted from the month's judgments and the audit trail (llm_calls, one lookup per request hash: some 55,000
-- for a real month), a second or more of a cold command. The roll-up counts them anyway (costs.month_requests,
-- for month_costs and month_judging_spend); it now keeps the whole count here with a stamp of what it was
-- counted from: the month's reports and its judgments under the judge (row count and newest xmin; llm_calls
-- rows are never updated). `cost` reads the kept count when the stamp still matches and counts afresh when
-- anything was judged since.

CREATE TABLE deepscholar.month_judge_requests (
    release_id   text NOT NULL,
    judge_config text NOT NULL,
    stamp        text NOT NULL,      -- reports and judgments of the month under the judge, when counted
    requests     text NOT NULL,      -- costs.month_requests' result as JSON text
    computed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config)
);

COMMENT ON TABLE deepscholar.month_judge_requests IS
    'A month''s judge requests per metric, system and transport as its roll-up counted them, with the stamp of the judgments counted.';
