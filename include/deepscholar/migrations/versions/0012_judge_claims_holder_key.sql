-- A holder's claims found by their whole key (deepscholar/evaluation/claims.py): releasing a chunk names
-- holder, metric, judge_config and the chunk's report ids, renewing names the holder. On the index of the
-- holder alone, both read every row the holder ever claimed in the month (dead ones too, until vacuum),
-- and the planner, believing the table empty, sometimes preferred scanning the whole primary key.
DROP INDEX deepscholar.judge_claims_holder;
CREATE INDEX judge_claims_holder ON deepscholar.judge_claims (holder, metric, judge_config, report_id);
