-- 1 = taken first. NULL: the candidate did not pass the metadata filters, or the release was built before
-- the cap existed. Candidates never reached because the cap was met are skipped with reason 'not_sampled'.
ALTER TABLE deepscholar.release_candidates ADD COLUMN sample_rank integer;
CREATE INDEX release_candidates_sample_rank ON deepscholar.release_candidates (release_id, sample_rank);
