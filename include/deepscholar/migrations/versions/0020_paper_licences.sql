-- The licence of each query paper (docs/ARCHITECTURE.md, "Published data (export)").
--
-- arXiv's search API does not say under which licence a paper is distributed; its OAI-PMH interface does
-- (metadata format `arXiv`, element <license>). The release fetches it for every kept query paper, and
-- `deepscholar release licences M` for a month published before. It lives apart from release_queries,
-- which a published release seals: a licence can be looked up (or corrected) after publication without
-- touching the sealed rows. `deepscholar export` withholds the texts of papers whose licence does not
-- allow redistribution.
CREATE TABLE deepscholar.paper_licences (
    arxiv_id    text PRIMARY KEY,              -- version-less: OAI-PMH exposes a paper's latest version
    license     text,                          -- the licence URL; NULL: unknown (the record has none)
    fetched_at  timestamptz NOT NULL DEFAULT now(),
    error       text                           -- why the lookup found no record (idDoesNotExist, deleted)
);

COMMENT ON TABLE deepscholar.paper_licences IS
    'Licence of each query paper from arXiv''s OAI-PMH record; NULL license = unknown (never redistributable)';
