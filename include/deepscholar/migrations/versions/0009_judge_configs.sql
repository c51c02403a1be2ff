-- Provenance of every judge_config string that keys judgments, scores and boards: which models, with which
-- request parameters, and which metric versions (definition + prompt versions) were judged under it.
CREATE TABLE deepscholar.judge_configs (
    judge_config     text PRIMARY KEY,
    kind             text NOT NULL CHECK (kind IN ('local', 'llm')),
    model            text NOT NULL,                         -- the default model ('local': the embedding model)
    metric_models    jsonb NOT NULL DEFAULT '{}'::jsonb,    -- {metric: model} where it differs from `model`
    params           jsonb NOT NULL DEFAULT '{}'::jsonb,    -- what every request carries (temperature, seed, max_tokens)
    metric_versions  jsonb NOT NULL DEFAULT '{}'::jsonb,    -- {metric: metric_version} judged under it, latest
    first_used_at    timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
