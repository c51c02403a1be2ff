-- What an importer found wrong with a report, as short machine-readable flags (e.g. no_sources,
-- unresolved_citations); empty when nothing was found. A constant default: existing rows get '{}'
-- without a table rewrite.
ALTER TABLE deepscholar.reports ADD COLUMN quality_flags text[] NOT NULL DEFAULT '{}';
