-- Budgets that hold on every path (issue 46).
--
-- A budget used to count the llm_calls rows its month's stored judgments name: the answers of a question
-- whose judgment was not stored yet (an earlier round of nugget coverage or RACE judged through batches, a
-- chunk cut short) were paid for and counted nothing. From this revision the process that pays for an answer
-- writes whose budget it was paid from on the row itself (llm/spend.py: a scope such as
-- 'judging/2025-06/llm:openai/gpt-4o', 'drift/...', 'release/2025-06'); a request recorded for a batch
-- carries it too, and its answer's row takes it when the batch is collected. A budget then sums the rows of
-- its scopes (and, for rows written before this revision, the requests its stored judgments name).
ALTER TABLE deepscholar.llm_calls ADD COLUMN IF NOT EXISTS billed_to text;
COMMENT ON COLUMN deepscholar.llm_calls.billed_to IS
    'the budget this answer was paid from (llm/spend.py scope); NULL: written before 0039, or outside any budget';
-- Every row so far is NULL: the partial index starts empty and only grows with new answers.
CREATE INDEX IF NOT EXISTS llm_calls_billed_to_idx ON deepscholar.llm_calls (billed_to) WHERE billed_to IS NOT NULL;

-- A queued request (0038: keyed by month, judge config and hash) carries its budget to its answer. The budget
-- check prices a month's waiting and running requests through its queue (llm_batch_requests_open_idx), so
-- billed_to needs no index of its own here.
ALTER TABLE deepscholar.llm_batch_requests ADD COLUMN IF NOT EXISTS billed_to text;
COMMENT ON COLUMN deepscholar.llm_batch_requests.billed_to IS
    'the budget the request is paid from once answered (copied to its llm_calls row)';

-- A run's estimate as its approval shows it, and the approval itself. The judge tasks read what was approved
-- here, never from an XCom (which any account allowed to edit the DAG's task instances may rewrite).
ALTER TABLE deepscholar.judging_estimates
    ADD COLUMN month_total_usd numeric,  -- spent + predicted, unpriced calls counted at their fallback price
    ADD COLUMN pricing text,             -- how calls of an unpriced model were counted, when the work has any
    ADD COLUMN detail text,              -- the one line and the table the approval shows
    ADD COLUMN approved_usd numeric,     -- the month's total an operator approved (NULL: not approved)
    ADD COLUMN approved_by text,
    ADD COLUMN approved_at timestamptz;
CREATE INDEX IF NOT EXISTS judging_estimates_run_idx ON deepscholar.judging_estimates (run_id);
