-- Issue 46 §14: `EXTRACTIVE` registered beside `extractive` was a second system on the board. Names are
-- ASCII (the systems CHECK), so lower() is their case-insensitive form; a unique index on it makes a
-- second spelling fail however it is written (the registry refuses it first with a sentence). A warehouse
-- already holding such twins is not guessed at: the revision stops, naming them, and the operator keeps one
-- (their reports stay apart until then).
DO $$
DECLARE
    twins text;
BEGIN
    SELECT string_agg(names, '; ') INTO twins FROM (
        SELECT string_agg(system_id, ', ' ORDER BY system_id) AS names
        FROM deepscholar.systems GROUP BY lower(system_id) HAVING count(*) > 1) t;
    IF twins IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'systems whose names differ only by case: ' || twins
            || '; rename or delete all but one of each before upgrading (names are one system whatever their case)';
    END IF;
END $$;
CREATE UNIQUE INDEX systems_name_any_case ON deepscholar.systems (lower(system_id));

-- Issue 46 §12: a system registered from the leaderboard page keeps its `api_base` under
-- DEEPSCHOLAR_WEB_API_BASES, checked again each time it runs (systems/generation.py), not only when it was
-- registered. 'operator': `deepscholar systems add` (and every system before this revision); an operator's
-- move of a page-registered system's endpoint keys makes it the operator's.
ALTER TABLE deepscholar.systems
    ADD COLUMN registered_from text NOT NULL DEFAULT 'operator' CHECK (registered_from IN ('operator', 'page'));
