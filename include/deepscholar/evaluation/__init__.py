"""Judging a month's reports on every family's metrics (the core and the tracks: evaluation/registry.py),
rolling the scores up into boards, validating the judges against people and each other, and what it costs.
docs/ARCHITECTURE.md's layout groups the modules by those four concerns."""
