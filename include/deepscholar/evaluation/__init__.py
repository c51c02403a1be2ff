"""Evaluation, by concern, one sub-package each:

- `metrics/`: what is measured. The registry, the metric base types, and one folder per family (the core
  and each track) holding its metrics, prompts and per-query data;
- `judging/`: turning reports into stored judgments and scores;
- `boards/`: rolling scores up into versioned, checked leaderboards, and reading them;
- `judge_validation/`: how far each judge can be trusted, against people and other judges;
- `costs`: what a month costs, predicted before a run and read from the audit trail after.

Each sub-package's `__init__` names its public modules (`__all__`); the rest start with `_` and stay inside
(tests/unit/test_layering.py). docs/ARCHITECTURE.md's layout and glossary follow this tree.
"""
