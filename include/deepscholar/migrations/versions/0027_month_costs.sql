-- A month's costs, computed from that month's rows alone, and stored when its boards are rolled up, so
-- reading them does not grow with the warehouse. The view leaderboard_costs re-aggregated every judgment's
-- requests of every month on each read (its `judging` CTE is used twice, so PostgreSQL computed it whole
-- before filtering by release): at twelve months (2.1 million judgments) one month's costs took 10 s, and
-- the page and `deepscholar leaderboard` read them on every call. Now:
-- - month_costs_of(release) computes one month's rows: the view's definition, bounded to the month from
--   the first table it reads;
-- - leaderboard_costs keeps its name and columns and stays live (what the audit trail says now, as
--   `deepscholar cost` needs it), calling month_costs_of once per release it is asked about;
-- - month_costs holds each month's rows as of its latest roll-up, which refreshes them for its judge
--   config (evaluation/boards/rollup.py); the board readers (the page, `deepscholar leaderboard`) read it
--   beside the board, and the backfill below fills every month already there.
CREATE TABLE deepscholar.month_costs (
    release_id              text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    system_id               text NOT NULL,
    judge_config            text NOT NULL,
    n_reports               bigint,
    gen_calls               bigint,
    gen_prompt_tokens       bigint,
    gen_completion_tokens   bigint,
    gen_cost_usd            double precision,
    mean_latency_ms         double precision,
    judge_requests          bigint NOT NULL DEFAULT 0,
    judge_prompt_tokens     bigint,
    judge_completion_tokens bigint,
    judge_cost_usd          double precision,
    computed_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, judge_config, system_id)
);

CREATE FUNCTION deepscholar.month_costs_of(p_release text) RETURNS SETOF deepscholar.month_costs
LANGUAGE sql STABLE AS $$
WITH generation AS (
    SELECT r.release_id, r.system_id,
           count(*) FILTER (WHERE r.status = 'ok') AS n_reports,
           sum(r.n_llm_calls)::bigint AS gen_calls,
           sum(r.prompt_tokens)::bigint AS gen_prompt_tokens,
           sum(r.completion_tokens)::bigint AS gen_completion_tokens,
           CASE WHEN bool_and(r.cost_usd IS NOT NULL OR r.n_llm_calls = 0) THEN coalesce(sum(r.cost_usd), 0) END
               AS gen_cost_usd,
           avg(r.latency_ms) FILTER (WHERE r.status = 'ok') AS mean_latency_ms
    FROM deepscholar.reports r
    WHERE r.release_id = p_release
    GROUP BY r.release_id, r.system_id
), asked AS (
    SELECT DISTINCT r.release_id, r.system_id, j.judge_config, h.request_hash
    FROM deepscholar.reports r
    JOIN deepscholar.judgments j ON j.report_id = r.report_id
    CROSS JOIN LATERAL unnest(j.request_hashes) AS h (request_hash)
    WHERE r.release_id = p_release
), judging AS (
    SELECT a.release_id, a.system_id, a.judge_config,
           count(*) AS judge_requests,
           sum(c.prompt_tokens)::bigint AS judge_prompt_tokens,
           sum(c.completion_tokens)::bigint AS judge_completion_tokens,
           CASE WHEN bool_and(c.cost_usd IS NOT NULL) THEN sum(c.cost_usd) END AS judge_cost_usd
    FROM asked a
    LEFT JOIN deepscholar.llm_calls c ON c.request_hash = a.request_hash
    GROUP BY a.release_id, a.system_id, a.judge_config
), boards AS (
    SELECT DISTINCT s.release_id, s.system_id, s.judge_config
    FROM deepscholar.leaderboard_systems s WHERE s.release_id = p_release
    UNION
    SELECT j.release_id, j.system_id, j.judge_config FROM judging j
)
SELECT b.release_id, b.system_id, b.judge_config, g.n_reports, g.gen_calls, g.gen_prompt_tokens,
       g.gen_completion_tokens, g.gen_cost_usd, g.mean_latency_ms,
       coalesce(j.judge_requests, 0) AS judge_requests, j.judge_prompt_tokens, j.judge_completion_tokens,
       j.judge_cost_usd, now() AS computed_at
FROM boards b
LEFT JOIN generation g ON g.release_id = b.release_id AND g.system_id = b.system_id
LEFT JOIN judging j ON j.release_id = b.release_id AND j.system_id = b.system_id AND j.judge_config = b.judge_config
$$;

INSERT INTO deepscholar.month_costs
SELECT c.* FROM deepscholar.releases rel CROSS JOIN LATERAL deepscholar.month_costs_of(rel.release_id) c;

CREATE OR REPLACE VIEW deepscholar.leaderboard_costs AS
SELECT rel.release_id, c.system_id, c.judge_config, c.n_reports, c.gen_calls, c.gen_prompt_tokens,
       c.gen_completion_tokens, c.gen_cost_usd, c.mean_latency_ms, c.judge_requests, c.judge_prompt_tokens,
       c.judge_completion_tokens, c.judge_cost_usd
FROM deepscholar.releases rel
CROSS JOIN LATERAL deepscholar.month_costs_of(rel.release_id) c;
