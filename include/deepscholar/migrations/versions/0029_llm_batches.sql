-- Judging through a provider's batch API (llm/batch_transport.py). A judge in batch mode answers what the
-- llm_calls cache holds and records every other request here instead of sending it; the requests are then
-- written as the provider's JSONL, submitted in batches, and each answer is stored in llm_calls exactly as
-- the direct path stores it, so the next judge pass finds it in the cache.

-- How an llm_calls row was obtained and priced: NULL for a request sent one by one (every row before this
-- revision), 'openai-batch' for an answer of OpenAI's Batch API, priced at the batch rate.
ALTER TABLE deepscholar.llm_calls ADD COLUMN IF NOT EXISTS transport text;
COMMENT ON COLUMN deepscholar.llm_calls.transport IS
    'NULL: sent one by one at the list price; otherwise the batch API that answered it (cost_usd at its batch price)';

-- One batch as submitted to a provider. batch_key is ours, chosen before anything is sent (a hash of the
-- requests and their attempt numbers) and sent as the batch's metadata, so a retry whose create answer was
-- lost finds the provider's batch instead of creating a second one.
CREATE TABLE deepscholar.llm_batches (
    batch_key          text PRIMARY KEY,
    provider           text NOT NULL,
    model              text NOT NULL,
    api_base           text,
    state              text NOT NULL DEFAULT 'preparing'
                       CHECK (state IN ('preparing', 'creating', 'submitted', 'ended', 'collected')),
    provider_status    text,          -- the provider's own word: validating, in_progress, completed, expired, ...
    provider_batch_id  text UNIQUE,
    input_file_id      text,
    output_file_id     text,
    error_file_id      text,
    n_requests         integer NOT NULL,
    n_bytes            bigint NOT NULL,
    n_answered         integer,
    n_errored          integer,
    last_error         text,
    send_lease_until   timestamptz,   -- a process uploading and creating it now (none when NULL or past)
    created_at         timestamptz NOT NULL DEFAULT now(),
    submitted_at       timestamptz,
    finished_at        timestamptz,
    collected_at       timestamptz
);
CREATE INDEX llm_batches_open_idx ON deepscholar.llm_batches (state) WHERE state <> 'collected';

-- A request waiting for a batch, keyed like llm_calls (its request hash) and holding the canonical request
-- it was hashed from, which is what the JSONL line is built from. pending: to submit; submitted: in batch
-- batch_key; done: its answer is in llm_calls; failed: no answer after DEEPSCHOLAR_BATCH_MAX_ATTEMPTS
-- submissions (the judgment that needs it is stored unscored with last_error).
CREATE TABLE deepscholar.llm_batch_requests (
    request_hash  text PRIMARY KEY,
    model         text NOT NULL,
    api_base      text,
    purpose       text,
    request       jsonb NOT NULL,
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'submitted', 'done', 'failed')),
    batch_key     text REFERENCES deepscholar.llm_batches (batch_key),
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX llm_batch_requests_open_idx ON deepscholar.llm_batch_requests (model, api_base, state)
    WHERE state IN ('pending', 'submitted');
CREATE INDEX llm_batch_requests_batch_idx ON deepscholar.llm_batch_requests (batch_key);
