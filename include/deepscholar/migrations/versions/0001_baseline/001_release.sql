-- Release (dataset) tables. Applied idempotently by `deepscholar db init`, in file-name order.
CREATE SCHEMA IF NOT EXISTS deepscholar;

CREATE TABLE IF NOT EXISTS deepscholar.releases (
    release_id      text PRIMARY KEY CHECK (release_id ~ '^[0-9]{4}-[0-9]{2}$' OR release_id ~ '^[a-z0-9][a-z0-9._-]*$'),
    source          text NOT NULL DEFAULT 'pipeline' CHECK (source IN ('pipeline', 'official')),
    window_start    timestamptz,
    window_end      timestamptz,
    config          jsonb NOT NULL DEFAULT '{}'::jsonb,
    status          text NOT NULL DEFAULT 'building'
                    CHECK (status IN ('building', 'gated', 'published', 'failed')),
    counts          jsonb NOT NULL DEFAULT '{}'::jsonb,
    gx_success      boolean,
    gx_result       jsonb,
    error           text,
    code_version    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    published_at    timestamptz
);

-- Every arXiv paper version the pipeline has seen (search results of any month).
CREATE TABLE IF NOT EXISTS deepscholar.papers (
    arxiv_id          text NOT NULL,
    version           integer NOT NULL CHECK (version >= 1),
    title             text NOT NULL,
    abstract          text NOT NULL DEFAULT '',
    authors           jsonb NOT NULL DEFAULT '[]'::jsonb,
    categories        jsonb NOT NULL DEFAULT '[]'::jsonb,
    primary_category  text,
    published         timestamptz,
    updated           timestamptz,
    comment           text,
    journal_ref       text,
    doi               text,
    first_seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (arxiv_id, version)
);

-- What happened to each paper the month's search returned: the filter that dropped it, or 'kept'.
CREATE TABLE IF NOT EXISTS deepscholar.release_candidates (
    release_id    text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    arxiv_id      text NOT NULL,
    version       integer NOT NULL,
    stage         text NOT NULL,   -- last stage reached: search, version, venue, source, section, bibliography, kept
    status        text NOT NULL CHECK (status IN ('pending', 'kept', 'skipped', 'error')),
    reason        text,            -- machine-readable reason when skipped/error (e.g. not_v1, no_venue)
    detail        text,            -- human-readable detail (exception text, matched phrase, ...)
    venue         text,
    venue_phrase  text,
    venue_field   text,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id)
);

CREATE TABLE IF NOT EXISTS deepscholar.release_queries (
    release_id          text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    arxiv_id            text NOT NULL,
    version             integer NOT NULL DEFAULT 1,
    row_index           integer,        -- position in an imported dataset file (official imports)
    title               text NOT NULL,
    abstract            text NOT NULL,
    authors             jsonb NOT NULL DEFAULT '[]'::jsonb,
    published           timestamptz,
    venue               text,
    section_title       text,
    section_level       text,
    section_file        text,
    section_raw_latex   text NOT NULL,
    section_text        text NOT NULL,
    word_count          integer NOT NULL,
    n_cite_keys         integer NOT NULL DEFAULT 0,
    extraction_notes    jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id)
);

CREATE TABLE IF NOT EXISTS deepscholar.exemplar_references (
    release_id          text NOT NULL,
    arxiv_id            text NOT NULL,
    cite_key            text NOT NULL,
    bib_type            text,
    bib_title           text,
    bib_authors         text,
    bib_year            text,
    bib_doi             text,
    bib_url             text,
    bib_fields          jsonb NOT NULL DEFAULT '{}'::jsonb,
    resolved_arxiv_id   text,            -- version-less
    openalex_id         text,
    resolved_title      text,
    resolved_abstract   text,
    resolved_doi        text,
    resolution_method   text,            -- e.g. bib_eprint, arxiv_title_search, openalex_doi, unresolved
    resolution_error    text,
    cited_by_count      integer,         -- OpenAlex cited_by_count frozen for this release
    is_important        boolean,
    importance_judge    text,            -- judge_config that labelled it
    importance_reason   text,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id, cite_key),
    FOREIGN KEY (release_id, arxiv_id) REFERENCES deepscholar.release_queries (release_id, arxiv_id) ON DELETE CASCADE
);

CREATE TABLE IF NOT EXISTS deepscholar.nuggets (
    release_id    text NOT NULL,
    arxiv_id      text NOT NULL,
    nugget_idx    integer NOT NULL,
    text          text NOT NULL,
    importance    text NOT NULL CHECK (importance IN ('vital', 'okay')),
    judge_config  text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, arxiv_id, nugget_idx),
    FOREIGN KEY (release_id, arxiv_id) REFERENCES deepscholar.release_queries (release_id, arxiv_id) ON DELETE CASCADE
);

-- The local, reproducible search corpus: every arXiv paper seen (queries, resolved references, search results).
CREATE TABLE IF NOT EXISTS deepscholar.corpus (
    arxiv_id     text PRIMARY KEY,
    title        text NOT NULL,
    abstract     text NOT NULL DEFAULT '',
    authors      jsonb NOT NULL DEFAULT '[]'::jsonb,
    published    timestamptz,
    categories   jsonb NOT NULL DEFAULT '[]'::jsonb,
    doi          text,
    source       text NOT NULL,         -- how it entered: search, reference, official_import, ...
    search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('english', coalesce(abstract, '')), 'B')) STORED,
    added_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS corpus_search_idx ON deepscholar.corpus USING gin (search_vector);
CREATE INDEX IF NOT EXISTS corpus_published_idx ON deepscholar.corpus (published);

-- Cache and audit log of every LLM call: the key covers model, base URL, messages and every parameter.
CREATE TABLE IF NOT EXISTS deepscholar.llm_calls (
    request_hash        text PRIMARY KEY,
    model               text NOT NULL,
    api_base            text,
    purpose             text,
    request             jsonb NOT NULL,
    response            jsonb,
    response_text       text,
    provider_model      text,
    prompt_tokens       integer,
    completion_tokens   integer,
    cost_usd            double precision,
    latency_ms          double precision,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS llm_calls_purpose_idx ON deepscholar.llm_calls (purpose);
