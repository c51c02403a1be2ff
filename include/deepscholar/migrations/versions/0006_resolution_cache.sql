-- One row per lookup key of a resolved reference. The identity of what it resolved to is stable across
-- months; the OpenAlex cited_by_count is not and is never taken from here: each release fetches it again
-- (batched by openalex_id) and freezes its own. References that resolved to nothing are not cached.
CREATE TABLE deepscholar.resolution_cache (
    key_kind            text NOT NULL CHECK (key_kind IN ('doi', 'arxiv', 'title')),
    key                 text NOT NULL,       -- bare lower-case DOI, version-less arXiv id, normalised title
    resolved_arxiv_id   text,
    openalex_id         text,
    resolution_method   text NOT NULL,       -- how it was first resolved (bib_arxiv_id, arxiv_title_search, ...)
    first_release_id    text NOT NULL,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_kind, key),
    CHECK (resolved_arxiv_id IS NOT NULL OR openalex_id IS NOT NULL)
);
