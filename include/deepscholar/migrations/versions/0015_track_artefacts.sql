-- What a release builds for the evaluation tracks that need more than the core's labels (docs/METRICS.md
-- "Tracks"): RACE's per-query dimension weights and criteria, and the ground-truth claims of the claims
-- track. Built after the nuggets by the release DAG for the month's enabled tracks, or later for a
-- published month by `deepscholar release enrich`, which adds these rows and touches nothing else.

-- Which track artefacts a release has, who made them, and whether they passed their GX checks.
CREATE TABLE deepscholar.release_track_artefacts (
    release_id       text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    track            text NOT NULL,
    judge_config     text NOT NULL,      -- the release judge that made them
    prompt_versions  jsonb NOT NULL DEFAULT '{}'::jsonb,
    counts           jsonb NOT NULL DEFAULT '{}'::jsonb,
    gx_success       boolean,            -- NULL until checked
    gx_result        jsonb,
    built_at         timestamptz NOT NULL DEFAULT now(),
    checked_at       timestamptz,
    PRIMARY KEY (release_id, track)
);

-- RACE: per query and dimension, the dimension's weight and its query-specific criteria.
CREATE TABLE deepscholar.race_rubrics (
    release_id      text NOT NULL,
    arxiv_id        text NOT NULL,
    dimension       text NOT NULL CHECK (dimension IN
                        ('comprehensiveness', 'insight', 'instruction_following', 'readability')),
    weight          double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),  -- sums to 1 per query
    raw_weight      double precision,   -- as the judge gave it, before re-normalisation
    renormalised    boolean NOT NULL DEFAULT false,
    criteria        jsonb NOT NULL,     -- [{criterion, explanation, weight}], weights summing to 1
    judge_config    text NOT NULL,
    prompt_version  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id, dimension),
    FOREIGN KEY (release_id, arxiv_id) REFERENCES deepscholar.release_queries (release_id, arxiv_id)
        ON DELETE CASCADE
);

-- Claims: one ground-truth claim per important exemplar reference: the work and what the exemplar says
-- about it, condensed into one line by the release judge.
CREATE TABLE deepscholar.gt_claims (
    release_id      text NOT NULL,
    arxiv_id        text NOT NULL,
    cite_key        text NOT NULL,
    work_title      text,
    work_arxiv_id   text,
    work_doi        text,
    connection      text NOT NULL CHECK (btrim(connection) <> ''),
    evidence        text NOT NULL,      -- the exemplar sentence(s) citing it, markers removed
    judge_config    text NOT NULL,
    prompt_version  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id, cite_key),
    FOREIGN KEY (release_id, arxiv_id, cite_key)
        REFERENCES deepscholar.exemplar_references (release_id, arxiv_id, cite_key) ON DELETE CASCADE
);
