-- A month's generation costs per system, defined once: month_costs_of reads them, and so does the roll-up,
-- which stores a month's costs and its judge requests by transport from one pass over the month's requests
-- (evaluation/costs.py `month_requests`) instead of reading them twice (once here, once for the transports).
-- month_costs_of is otherwise as 0031 left it.
CREATE FUNCTION deepscholar.month_generation_costs(p_release text)
RETURNS TABLE (system_id text, n_reports bigint, gen_calls bigint, gen_prompt_tokens bigint,
               gen_completion_tokens bigint, gen_cost_usd double precision, mean_latency_ms double precision)
LANGUAGE sql STABLE
AS $$
SELECT r.system_id,
       count(*) FILTER (WHERE r.status = 'ok'),
       sum(r.n_llm_calls)::bigint,
       sum(r.prompt_tokens)::bigint,
       sum(r.completion_tokens)::bigint,
       CASE WHEN bool_and(r.cost_usd IS NOT NULL OR r.n_llm_calls = 0) THEN coalesce(sum(r.cost_usd), 0) END,
       avg(r.latency_ms) FILTER (WHERE r.status = 'ok')
FROM deepscholar.reports r
WHERE r.release_id = p_release
GROUP BY r.system_id
$$;

CREATE OR REPLACE FUNCTION deepscholar.month_costs_of(p_release text) RETURNS SETOF deepscholar.month_costs
LANGUAGE sql STABLE
SET jit = off
SET work_mem = '32MB'
AS $$
WITH generation AS (
    SELECT p_release AS release_id, g.* FROM deepscholar.month_generation_costs(p_release) g
), asked AS (
    SELECT DISTINCT r.release_id, r.system_id, j.judge_config, h.request_hash
    FROM deepscholar.reports r
    CROSS JOIN LATERAL (SELECT j.judge_config, j.request_hashes FROM deepscholar.judgments j
                        WHERE j.report_id = r.report_id OFFSET 0) j
    CROSS JOIN LATERAL unnest(j.request_hashes) AS h (request_hash)
    WHERE r.release_id = p_release
), judging AS (
    SELECT a.release_id, a.system_id, a.judge_config,
           count(*) AS judge_requests,
           sum(c.prompt_tokens)::bigint AS judge_prompt_tokens,
           sum(c.completion_tokens)::bigint AS judge_completion_tokens,
           CASE WHEN bool_and(c.cost_usd IS NOT NULL) THEN sum(c.cost_usd) END AS judge_cost_usd
    FROM asked a
    LEFT JOIN LATERAL (SELECT c.prompt_tokens, c.completion_tokens, c.cost_usd FROM deepscholar.llm_calls c
                       WHERE c.request_hash = a.request_hash OFFSET 0) c ON true
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
