-- What each benchmark run for a month is doing, so the state of a month is one SQL query away and the
-- release DAG knows whether a published release still needs a benchmark run (deepscholar.scheduling).
CREATE TABLE deepscholar.benchmark_runs (
    release_id    text NOT NULL,
    run_id        text NOT NULL,
    run_type      text,
    triggered_by  text,
    judge_config  text,
    state         text NOT NULL CHECK (state IN ('waiting', 'running', 'published', 'blocked', 'failed')),
    message       text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    PRIMARY KEY (release_id, run_id)
);
CREATE INDEX benchmark_runs_state ON deepscholar.benchmark_runs (release_id, state);
