"""Evaluation, by concern, one part each, on floors (bottom first; a part imports only the floors below):

- `metrics/`: what is measured. The registry, the metric base types, and one folder per family (the core
  and each track) holding its metrics, prompts and per-query data (and `title_evidence`, beside it);
- `judge_spec`: which judge scores a month (`JudgeSpec`), the one way text becomes a judge;
- `money/`: what a month costs and may cost (costs, budget);
- `judging/`: turning reports into stored judgments and scores;
- `boards/`: rolling scores up into versioned, checked leaderboards, and reading them;
- `judge_validation/`: how far each judge can be trusted, against people and other judges;
- `pipeline`: a month outside Airflow, judging then the roll-up.

Each sub-package's `__init__` names its public modules (`__all__`); the rest start with `_` and stay inside
(tests/unit/test_layering.py, which also holds the floors). docs/ARCHITECTURE.md's layout and glossary follow this tree.
"""
