"""Evaluation, by concern, one part each, on floors (bottom first; a part imports only the floors below):
metrics/ < judge_spec < money/ < judging/ < boards/ < judge_validation/ < pipeline.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation`.
"""
