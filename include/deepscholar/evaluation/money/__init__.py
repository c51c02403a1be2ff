"""Money: what evaluating a month costs and what it may cost, in one place below judging.

Public (judging, boards, judge validation and the edges may import these modules):
- `costs`: a month's generation and judging costs, predicted before a run and read from the audit trail
  after, and the month's spend the roll-up stores beside the board;
- `budget`: a month's judging within a budget: the estimate, the approval and the running limit.

Money reads the metric registry and `judge_spec` only; what judging plans it is handed, never asks for
(tests/unit/test_layering.py, the evaluation floors).
"""

__all__ = ["budget", "costs"]
