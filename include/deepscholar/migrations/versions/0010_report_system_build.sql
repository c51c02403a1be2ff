-- The build of the system that wrote each report (deepscholar/systems/build.py): its registered version,
-- the kind's code version, the versions of its prompt files, its models and a short hash of its
-- output-defining config as one readable string (or, for an imported report, the import format and its
-- version), and the same in parts. Written on every report upsert. Rows stored before this revision
-- keep NULL: an unknown build, which the month's reports check counts as a build of its own.
ALTER TABLE deepscholar.reports ADD COLUMN system_build text;
ALTER TABLE deepscholar.reports ADD COLUMN system_build_detail jsonb;
