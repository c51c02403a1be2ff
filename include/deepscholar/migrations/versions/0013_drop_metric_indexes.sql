-- judgments and metric_scores are read by report only (a release's reports joined to their rows, a report's
-- page), and both are written a chunk of reports at a time while a month is judged. Their (metric,
-- judge_config, ...) indexes served no reader, cost an index entry per row written, and misled the planner
-- while a month was judged: its statistics lag (a new judge config looks like a handful of rows), so the
-- delete of a chunk's stale judgments and score variants took that index and scanned every row of the
-- metric judged so far, for every chunk (12 ms per chunk at 4,000 reports, growing with the month). With
-- the primary key alone, whose first column is report_id, they read only the chunk's rows.
DROP INDEX deepscholar.judgments_metric_idx;
DROP INDEX deepscholar.metric_scores_metric_idx;
