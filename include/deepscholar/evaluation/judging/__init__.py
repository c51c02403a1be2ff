"""Judging: turning a month's reports into stored judgments and scores.

Public (the DAGs, the CLI, the page and the other evaluation sub-packages may import these modules):
- `runner`: `judge_job` (one Airflow task's units), `judge_units` and `judge_metric` (one metric over given
  reports);
- `evaluate`: `judge_release` (a whole month outside Airflow, direct or through batches; the roll-up is the
  caller's: evaluation/pipeline.py) and `estimate_for_month` (what the DAG's approval step reads);
- `jobs`: how a month's judging is cut into Airflow tasks of equal work;
- `report_contexts`: loading the reports, sources and query data that metrics read;
- `batch_rounds`: judging through a provider's batch API, in rounds (collect, submit, wait, collect results),
  one step at a time for the benchmark DAG's sensor.

Private (`_`): `_leases` (two evaluations of a month never ask the provider twice for one judgment) and
`_pending` (what is left to judge, as SQL). Nothing outside this package imports them
(tests/unit/test_layering.py).
"""

__all__ = ["batch_rounds", "evaluate", "jobs", "report_contexts", "runner"]
