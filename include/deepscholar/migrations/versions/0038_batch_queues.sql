-- One batch queue per month and judge config (llm/batch_transport.py, BatchQueue).
--
-- Until this revision llm_batch_requests held every run's requests in one queue: a step submitted whatever
-- was pending, also what another month's budget had refused, and a month's pending-cost check counted the
-- other months' requests. From here on a request belongs to the month and judge config that asked it (the
-- same question asked by two months is two rows: each month pays for and waits on its own), and so does a
-- batch; each step submits, polls, collects and prices its own queue only.
--
-- run_id: the run (an Airflow run id, or one `evaluate` call) that recorded the request, or recorded it
-- again after it failed. A request that failed for good fails the items of that run only; a later run that
-- needs it asks it again.
--
-- Rows written before this revision belong to no month. Those not in a batch at the provider are dropped:
-- a pending request was never sent (the next pass of its month records it again), a done one has its
-- answer in llm_calls, a failed one is asked again by the next run, and a batch not yet created was never
-- sent. A batch at the provider (submitted or ended) keeps its requests in the queue of no month ('', ''),
-- which every month's step polls and collects, so answers already paid for reach llm_calls; batches
-- collected before keep their rows (what was sent and when) in that queue too.

DELETE FROM deepscholar.llm_batch_requests q
WHERE q.state <> 'submitted'
   OR q.batch_key IS NULL
   OR q.batch_key IN (SELECT batch_key FROM deepscholar.llm_batches WHERE state IN ('preparing', 'creating'));
DELETE FROM deepscholar.llm_batches WHERE state IN ('preparing', 'creating');

ALTER TABLE deepscholar.llm_batches
    ADD COLUMN release_id text NOT NULL DEFAULT '',
    ADD COLUMN judge_config text NOT NULL DEFAULT '',
    -- downloads of its output or error file that failed (a slow or broken answer): tried again by later
    -- steps a few times, then the batch is collected with what could be read
    ADD COLUMN collect_failures integer NOT NULL DEFAULT 0;
ALTER TABLE deepscholar.llm_batches ALTER COLUMN release_id DROP DEFAULT, ALTER COLUMN judge_config DROP DEFAULT;

ALTER TABLE deepscholar.llm_batch_requests
    ADD COLUMN release_id text NOT NULL DEFAULT '',
    ADD COLUMN judge_config text NOT NULL DEFAULT '',
    ADD COLUMN run_id text;
ALTER TABLE deepscholar.llm_batch_requests
    ALTER COLUMN release_id DROP DEFAULT, ALTER COLUMN judge_config DROP DEFAULT,
    DROP CONSTRAINT llm_batch_requests_pkey,
    ADD PRIMARY KEY (release_id, judge_config, request_hash);

DROP INDEX deepscholar.llm_batch_requests_open_idx;
CREATE INDEX llm_batch_requests_open_idx ON deepscholar.llm_batch_requests (release_id, judge_config, state)
    WHERE state IN ('pending', 'submitted');
DROP INDEX deepscholar.llm_batches_open_idx;
CREATE INDEX llm_batches_open_idx ON deepscholar.llm_batches (release_id, judge_config, state)
    WHERE state <> 'collected';

COMMENT ON COLUMN deepscholar.llm_batch_requests.release_id IS
    'the month whose judging asked it (with judge_config: its queue); '''' for a request sent before 0038';
COMMENT ON COLUMN deepscholar.llm_batch_requests.run_id IS
    'the run that recorded it (again): a request failed for good fails that run''s items only';
COMMENT ON COLUMN deepscholar.llm_batches.collect_failures IS
    'failed downloads of its output or error file; past a few, it is collected with what could be read';
