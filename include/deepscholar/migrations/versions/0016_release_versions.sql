-- Published means immutable (docs/ARCHITECTURE.md, "Versions: releases and boards").
--
-- A release is sealed when it is published with a manifest hash: the sorted query ids and a digest of each
-- query's rows (the query, its exemplar references, its nuggets). From then on its queries, references and
-- nuggets never change in place: a trigger refuses it, whatever the writer. A correction is a new version of
-- the month (release id '2025-06.v2', base_id '2025-06', version 2) with a changelog entry (what, why, when);
-- the old version's rows and hash stay, and stay queryable.

ALTER TABLE deepscholar.releases
    ADD COLUMN base_id        text,
    ADD COLUMN version        integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    ADD COLUMN manifest_hash  text,   -- set at publication (release_manifest_hash); seals the release
    ADD COLUMN manifest       jsonb;  -- {n_queries, n_references, n_nuggets, query_digests: {arxiv_id: digest}}
UPDATE deepscholar.releases SET base_id = release_id;
ALTER TABLE deepscholar.releases ALTER COLUMN base_id SET NOT NULL;
-- A row written without base_id (every writer before this revision) is version 1 of itself.
CREATE FUNCTION deepscholar.default_release_base_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.base_id := coalesce(NEW.base_id, NEW.release_id);
    RETURN NEW;
END
$$;
CREATE TRIGGER releases_default_base_id BEFORE INSERT ON deepscholar.releases
    FOR EACH ROW EXECUTE FUNCTION deepscholar.default_release_base_id();
ALTER TABLE deepscholar.releases ADD CONSTRAINT releases_base_version_key UNIQUE (base_id, version);
COMMENT ON COLUMN deepscholar.releases.base_id IS
    'The release this row is a version of: the month (2025-06) for 2025-06, 2025-06.v2, ...';

-- One digest per query: every field a system or a judge reads from the release. Timestamps as epoch seconds
-- and jsonb's canonical text, so the digest does not depend on the session's time zone or on key order.
CREATE FUNCTION deepscholar.release_query_digests(p_release text)
RETURNS TABLE (arxiv_id text, digest text) LANGUAGE sql STABLE AS $$
SELECT q.arxiv_id,
       encode(sha256(convert_to(jsonb_build_array(
           q.version, q.title, q.abstract, q.authors, extract(epoch FROM q.published), q.venue, q.section_title,
           q.section_raw_latex, q.section_text, q.word_count,
           (SELECT coalesce(jsonb_agg(jsonb_build_array(
                       e.cite_key, e.bib_title, e.bib_authors, e.bib_year, e.bib_doi, e.resolved_arxiv_id,
                       e.openalex_id, e.resolved_title, e.resolved_abstract, e.resolved_doi, e.cited_by_count,
                       e.is_important) ORDER BY e.cite_key COLLATE "C"), '[]'::jsonb)
              FROM deepscholar.exemplar_references e
             WHERE e.release_id = q.release_id AND e.arxiv_id = q.arxiv_id),
           (SELECT coalesce(jsonb_agg(jsonb_build_array(n.nugget_idx, n.text, n.importance)
                                      ORDER BY n.nugget_idx), '[]'::jsonb)
              FROM deepscholar.nuggets n
             WHERE n.release_id = q.release_id AND n.arxiv_id = q.arxiv_id)
       )::text, 'UTF8')), 'hex')
FROM deepscholar.release_queries q
WHERE q.release_id = p_release
$$;

-- The manifest hash: the sorted query ids with their digests, hashed once.
CREATE FUNCTION deepscholar.release_manifest_hash(p_release text) RETURNS text LANGUAGE sql STABLE AS $$
SELECT encode(sha256(convert_to(coalesce(
           string_agg(d.arxiv_id || ' ' || d.digest, E'\n' ORDER BY d.arxiv_id COLLATE "C"), ''), 'UTF8')), 'hex')
FROM deepscholar.release_query_digests(p_release) d
$$;

-- Releases published before this revision are sealed as they are.
UPDATE deepscholar.releases r
   SET manifest_hash = deepscholar.release_manifest_hash(r.release_id),
       manifest = jsonb_build_object(
           'n_queries', (SELECT count(*) FROM deepscholar.release_queries q WHERE q.release_id = r.release_id),
           'n_references', (SELECT count(*) FROM deepscholar.exemplar_references e WHERE e.release_id = r.release_id),
           'n_nuggets', (SELECT count(*) FROM deepscholar.nuggets n WHERE n.release_id = r.release_id),
           'query_digests', (SELECT coalesce(jsonb_object_agg(d.arxiv_id, d.digest), '{}'::jsonb)
                               FROM deepscholar.release_query_digests(r.release_id) d))
 WHERE r.status = 'published';

-- The seal. A row of a sealed release can be neither inserted, updated nor deleted (deleting the release row
-- itself still cascades: its children then no longer see a sealed parent).
CREATE FUNCTION deepscholar.refuse_change_of_sealed_release() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rid text := CASE WHEN TG_OP = 'INSERT' THEN NEW.release_id ELSE OLD.release_id END;
BEGIN
    IF EXISTS (SELECT 1 FROM deepscholar.releases
                WHERE release_id = rid AND status = 'published' AND manifest_hash IS NOT NULL) THEN
        -- (No percent-sign placeholders: migrations run through the driver, which reads them as parameters.)
        RAISE EXCEPTION USING
            MESSAGE = 'release ' || rid || ' is published and sealed (manifest '
                      || (SELECT left(manifest_hash, 12) FROM deepscholar.releases WHERE release_id = rid)
                      || '): its ' || TG_TABLE_NAME || ' never change in place',
            ERRCODE = 'integrity_constraint_violation',
                  HINT = 'a correction is a new version of the month: deepscholar release build <month> --reason "..."';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$$;

CREATE TRIGGER sealed_release_queries BEFORE INSERT OR UPDATE OR DELETE ON deepscholar.release_queries
    FOR EACH ROW EXECUTE FUNCTION deepscholar.refuse_change_of_sealed_release();
CREATE TRIGGER sealed_exemplar_references BEFORE INSERT OR UPDATE OR DELETE ON deepscholar.exemplar_references
    FOR EACH ROW EXECUTE FUNCTION deepscholar.refuse_change_of_sealed_release();
CREATE TRIGGER sealed_nuggets BEFORE INSERT OR UPDATE OR DELETE ON deepscholar.nuggets
    FOR EACH ROW EXECUTE FUNCTION deepscholar.refuse_change_of_sealed_release();

-- A sealed release keeps its status, hash, manifest, spec, window and place among the versions.
CREATE FUNCTION deepscholar.refuse_unsealing_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'published' AND OLD.manifest_hash IS NOT NULL AND (
           NEW.status IS DISTINCT FROM OLD.status OR NEW.manifest_hash IS DISTINCT FROM OLD.manifest_hash
        OR NEW.manifest IS DISTINCT FROM OLD.manifest OR NEW.config IS DISTINCT FROM OLD.config
        OR NEW.window_start IS DISTINCT FROM OLD.window_start OR NEW.window_end IS DISTINCT FROM OLD.window_end
        OR NEW.base_id IS DISTINCT FROM OLD.base_id OR NEW.version IS DISTINCT FROM OLD.version
        OR NEW.published_at IS DISTINCT FROM OLD.published_at) THEN
        RAISE EXCEPTION USING
            MESSAGE = 'release ' || OLD.release_id || ' is published and sealed (manifest '
                      || left(OLD.manifest_hash, 12) || '): it never changes in place',
            ERRCODE = 'integrity_constraint_violation',
                  HINT = 'a correction is a new version of the month: deepscholar release build <month> --reason "..."';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER sealed_release BEFORE UPDATE ON deepscholar.releases
    FOR EACH ROW EXECUTE FUNCTION deepscholar.refuse_unsealing_release();

-- What changed between versions of a month, why, and when (one row per version after the first).
CREATE TABLE deepscholar.release_changelog (
    release_id        text PRIMARY KEY REFERENCES deepscholar.releases (release_id) ON DELETE CASCADE,
    base_id           text NOT NULL,
    version           integer NOT NULL CHECK (version >= 2),
    previous_release  text NOT NULL,           -- the version this one corrects
    reason            text NOT NULL,           -- why: the operator's words
    changes           text,                    -- what: one line, written at publication
    details           jsonb NOT NULL DEFAULT '{}'::jsonb,  -- {added: [...], removed: [...], changed: [...]}
    requested_at      timestamptz NOT NULL DEFAULT now(),
    published_at      timestamptz,
    UNIQUE (base_id, version)
);

-- Every version of every month, the current one (the latest published) marked.
CREATE VIEW deepscholar.release_versions AS
SELECT r.base_id, r.version, r.release_id, r.status, r.manifest_hash, r.published_at,
       c.previous_release, c.reason, c.changes, c.requested_at,
       r.version = max(r.version) FILTER (WHERE r.status = 'published') OVER (PARTITION BY r.base_id) AS is_current
FROM deepscholar.releases r
LEFT JOIN deepscholar.release_changelog c ON c.release_id = r.release_id;
