-- RACE's dimension weights are sampled several times per query at release time (DEEPSCHOLAR_RACE_WEIGHT_SAMPLES;
-- docs/METRICS.md "RACE track"): a race_rubrics row's weight is the mean of its samples' normalised weights,
-- and the row keeps the samples, in the order asked, so their number and spread stay on record:
--   {"sample": k, "weight": w, "raw_weight": r, "renormalised": b}  a sample the judge answered (w: this
--                                                                   dimension's weight within that sample,
--                                                                   re-normalised as one answer would be)
--   {"sample": k, "unscored": "reason"}                             a sample it could not answer (left out)
-- []: weights not sampled (the local release judge's one fixed set). NULL: not recorded (rubrics built
-- before this revision).
ALTER TABLE deepscholar.race_rubrics
    ADD COLUMN weight_samples jsonb CHECK (weight_samples IS NULL OR jsonb_typeof(weight_samples) = 'array');
