-- Cost and tokens on the board (docs/ARCHITECTURE.md, "Cost on the board").
--
-- Every LLM call is one row of llm_calls (the cache and audit trail), keyed by its request hash. A judgment
-- now records the hashes of the calls behind it (cached ones included), so the judge's tokens and cost of a
-- system's month are the sum over the distinct requests its judgments made: a question two reports share is
-- counted once per system that asked it, and once in the month's total. Judgments stored before this
-- revision, and the local judge's, have none (NULL): their cost is unknown, not zero.
ALTER TABLE deepscholar.judgments ADD COLUMN request_hashes text[];
COMMENT ON COLUMN deepscholar.judgments.request_hashes IS
    'llm_calls.request_hash of every call behind this judgment (cached ones too); NULL for the local judge';

-- Per release, system and judge config: generation's tokens, cost and latency (from reports) and the judge's
-- (from llm_calls through judgments.request_hashes). A cost is NULL when a call's price is unknown.
CREATE VIEW deepscholar.leaderboard_costs AS
WITH generation AS (
    SELECT release_id, system_id,
           count(*) FILTER (WHERE status = 'ok') AS n_reports,
           sum(n_llm_calls)::bigint AS gen_calls,
           sum(prompt_tokens)::bigint AS gen_prompt_tokens,
           sum(completion_tokens)::bigint AS gen_completion_tokens,
           CASE WHEN bool_and(cost_usd IS NOT NULL OR n_llm_calls = 0) THEN coalesce(sum(cost_usd), 0) END
               AS gen_cost_usd,
           avg(latency_ms) FILTER (WHERE status = 'ok') AS mean_latency_ms
    FROM deepscholar.reports
    GROUP BY release_id, system_id
), asked AS (
    SELECT DISTINCT r.release_id, r.system_id, j.judge_config, h.request_hash
    FROM deepscholar.judgments j
    JOIN deepscholar.reports r ON r.report_id = j.report_id
    CROSS JOIN LATERAL unnest(j.request_hashes) AS h (request_hash)
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
    SELECT DISTINCT release_id, system_id, judge_config FROM deepscholar.leaderboard_systems
    UNION
    SELECT release_id, system_id, judge_config FROM judging
)
SELECT b.release_id, b.system_id, b.judge_config, g.n_reports, g.gen_calls, g.gen_prompt_tokens,
       g.gen_completion_tokens, g.gen_cost_usd, g.mean_latency_ms,
       coalesce(j.judge_requests, 0) AS judge_requests, j.judge_prompt_tokens, j.judge_completion_tokens,
       j.judge_cost_usd
FROM boards b
LEFT JOIN generation g ON g.release_id = b.release_id AND g.system_id = b.system_id
LEFT JOIN judging j ON j.release_id = b.release_id AND j.system_id = b.system_id AND j.judge_config = b.judge_config;
