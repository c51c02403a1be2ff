-- Systems and the reports they write for a release's queries.
CREATE TABLE IF NOT EXISTS deepscholar.systems (
    system_id      text PRIMARY KEY CHECK (system_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$'),
    kind           text NOT NULL,
    version        text NOT NULL DEFAULT '1',
    config         jsonb NOT NULL DEFAULT '{}'::jsonb,
    active         boolean NOT NULL DEFAULT true,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS deepscholar.reports (
    report_id               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    release_id              text NOT NULL REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    system_id               text NOT NULL REFERENCES deepscholar.systems (system_id) ON DELETE CASCADE,
    arxiv_id                text NOT NULL,
    status                  text NOT NULL CHECK (status IN ('ok', 'system_error')),
    error                   text,
    text                    text,
    system_version          text,
    system_config           jsonb NOT NULL DEFAULT '{}'::jsonb,
    search_backend          text,
    search_cutoff           timestamptz,
    latency_ms              double precision,
    n_llm_calls             integer NOT NULL DEFAULT 0,
    prompt_tokens           integer NOT NULL DEFAULT 0,
    completion_tokens       integer NOT NULL DEFAULT 0,
    cost_usd                double precision,
    n_citations             integer NOT NULL DEFAULT 0,
    n_unresolved_citations  integer NOT NULL DEFAULT 0,
    n_leaked_sources        integer NOT NULL DEFAULT 0,
    trace                   jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, system_id, arxiv_id),
    FOREIGN KEY (release_id, arxiv_id) REFERENCES deepscholar.release_queries (release_id, arxiv_id) ON DELETE CASCADE
);

-- What a report cites: [n] in the text refers to source_idx n.
CREATE TABLE IF NOT EXISTS deepscholar.report_sources (
    report_id    bigint NOT NULL REFERENCES deepscholar.reports (report_id) ON DELETE CASCADE,
    source_idx   integer NOT NULL,
    arxiv_id     text,            -- version-less, when the source is an arXiv paper
    url          text,
    title        text,
    snippet      text,            -- the exact text the system saw
    published    timestamptz,     -- from corpus, else bounded from below by a new-style arXiv id
    date_basis   text,            -- corpus | arxiv_id_lower_bound | system | unknown
    leaked       boolean NOT NULL DEFAULT false,  -- published on or after the report's search cutoff
    PRIMARY KEY (report_id, source_idx)
);
CREATE INDEX IF NOT EXISTS report_sources_arxiv_idx ON deepscholar.report_sources (arxiv_id);

-- Row order of an imported dataset, so output folders named 0/, 1/, ... map to arXiv ids (FORMATS.md).
CREATE INDEX IF NOT EXISTS release_queries_row_idx ON deepscholar.release_queries (release_id, row_index);
