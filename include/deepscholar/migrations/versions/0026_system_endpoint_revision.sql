-- Where a system runs is part of its build once an operator moves it (issue: registration from the page):
-- `endpoint_revision` counts the changes of a registered system's endpoint keys (`endpoint`, `api_base`,
-- `api_key_env`; systems/registry.py ENDPOINT_KEYS), each made by `deepscholar systems add` on the command
-- line, never by the page. A report's build names it from the first change on (`+endpoint<N>`,
-- systems/build.py), so a month whose reports came from two endpoints of one system fails its reports check
-- instead of mixing them silently. 0: as registered (every system before this revision, builds unchanged).
ALTER TABLE deepscholar.systems
    ADD COLUMN endpoint_revision integer NOT NULL DEFAULT 0 CHECK (endpoint_revision >= 0);
