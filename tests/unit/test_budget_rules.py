"""The budget's rules that need no warehouse (issue 46): whose budget a run gets, what a call without a price
counts, and how soon a running limit sees what other judge tasks spent."""

from __future__ import annotations

import pytest

from deepscholar.errors import OverBudget
from deepscholar.evaluation.money.budget import run_budget
from deepscholar.llm import prices
from deepscholar.llm.spend import READ_SHARE, SpendLimit


@pytest.mark.parametrize(("requested", "ceiling", "expected"), [
    (None, 100.0, 100.0),     # no param: the operator's budget (the estimate and the judge tasks alike)
    (1e9, 100.0, 100.0),      # a param cannot raise it
    (5.0, 100.0, 5.0),        # ... but can lower it
    (0.0, 100.0, 0.0),
    (None, None, None),       # neither: no bound
    (5.0, None, 5.0),         # no operator's budget: the run's own
])
def test_a_runs_budget_is_the_operators_ceiling_lowered_never_raised_or_removed(requested, ceiling, expected,
                                                                                 monkeypatch):
    monkeypatch.delenv("DEEPSCHOLAR_JUDGE_BUDGET_USD", raising=False)
    assert run_budget(requested, ceiling) == expected
    if ceiling is not None:  # the default ceiling is the setting's
        monkeypatch.setenv("DEEPSCHOLAR_JUDGE_BUDGET_USD", str(ceiling))
        assert run_budget(requested) == expected


def test_a_call_without_a_price_counts_its_tokens_at_its_providers_highest_chat_price(monkeypatch):
    assert prices.price_of("openai/stub-judge") is None
    prompt, completion, how = prices.fallback_price_of("openai/stub-judge")
    table = prices._table()
    openai_chat = [e for e in table.values() if isinstance(e, dict) and e.get("litellm_provider") == "openai"
                   and e.get("mode") == "chat" and e.get("input_cost_per_token") is not None]
    assert prompt == max(e["input_cost_per_token"] for e in openai_chat) > prices.price_of("openai/gpt-4o")[0]
    assert completion == max(e.get("output_cost_per_token") or 0 for e in openai_chat)
    assert how.startswith("openai's highest chat price in litellm's table ($")
    # A provider the table has no chat price of is priced as OpenAI's; Ollama's own (free) prices are its.
    assert prices.fallback_price_of("hosted_vllm/my-model")[:2] == (prompt, completion)
    assert prices.fallback_price_of("ollama/no-such-model")[:2] == (0.0, 0.0)
    # An answer with its tokens, and one reporting none (the prediction's default tokens, 1500 and 150).
    assert prices.counted_cost_usd(None, "stub-judge", "openai/stub-judge", 100, 10) == pytest.approx(
        100 * prompt + 10 * completion)
    assert prices.counted_cost_usd(None, None, "openai/stub-judge", None, None) == pytest.approx(
        1500 * prompt + 150 * completion)
    # A priced model whose answer carried no usage: its own price, at the default tokens; a known cost as is.
    mini = prices.price_of("openai/gpt-4o-mini")
    assert prices.counted_cost_usd(None, None, "openai/gpt-4o-mini", None, None) == pytest.approx(
        1500 * mini[0] + 150 * mini[1])
    assert prices.counted_cost_usd(0.5, None, "openai/stub-judge", 10, 10) == 0.5


def test_judge_tasks_spending_at_once_stop_together_at_the_limit_not_each_at_its_own():
    """Each task's limit reads the warehouse (every task's stored answers) again each time it spent a tenth of
    the room left, so the others' spend shows long before the 30 s refresh, and more often near the limit."""
    stored = [0.0]  # what the warehouse holds: every task's answers, as they are stored
    reads = [0]

    def audited() -> float:
        reads[0] += 1
        return stored[0]

    tasks = [SpendLimit(1.0, "judging 2025-06", audited=audited, refresh_seconds=30.0) for _ in range(4)]
    running = list(tasks)
    while running:  # the four tasks take turns, one request each
        for task in list(running):
            try:
                task.before_request()
            except OverBudget:
                running.remove(task)
                continue
            stored[0] += 0.01  # its answer, stored, then told to its limit
            task.record(0.01, 0.01)
    # Past the $1.00 limit by at most one request per task (those sent on a figure read just before).
    assert 1.0 < stored[0] <= 1.0 + 4 * 0.01 + 1e-9, stored[0]
    assert reads[0] < 4 * 100  # far fewer reads than requests while far from the limit
    assert READ_SHARE == 0.1


def test_an_unpriced_answer_counts_in_a_running_limit():
    limit = SpendLimit(1.0, "judging 2025-06")
    limit.record(None, 0.6)
    limit.record(None, 0.6)
    with pytest.raises(OverBudget, match="counting 2 requests of unpriced models at their fallback price"):
        limit.before_request()


@pytest.mark.parametrize(("amount", "options", "written"), [
    (1234.5, {}, "$1,234.50"),             # messages: to the cent ...
    (0.5, {}, "$0.50"),
    (0.0, {}, "$0.00"),
    (0.0012, {}, "$0.0012"),               # ... and to 1/100 cent below a cent
    (None, {}, "unknown"),
    (0.5, {"decimals": 4}, "$0.5000"),     # a table aligning its column (the cost summary)
    (1234.5, {"decimals": 2}, "$1,234.50"),  # the backfill plan
    (1234.5, {"decimals": 4, "grouped": False}, "$1234.5000"),  # the drift check's messages
    (1234.5, {"sign": False, "grouped": False, "unknown": "n/a"}, "1234.50"),  # the board's "USD" column
    (0.004, {"sign": False, "grouped": False, "unknown": "n/a"}, "0.0040"),
    (None, {"sign": False, "grouped": False, "unknown": "n/a"}, "n/a"),
])
def test_money_is_written_by_one_function(amount, options, written):
    assert prices.usd_text(amount, **options) == written


def test_the_boards_cost_cells_write_money_with_it():
    from deepscholar.evaluation.boards.leaderboard import cost_cells

    cells = cost_cells({"gen_prompt_tokens": 1500, "gen_completion_tokens": 500, "gen_cost_usd": 0.004,
                        "judge_prompt_tokens": None, "judge_cost_usd": 12.5, "mean_latency_ms": 2500})
    assert cells == ["2.0k / n/a", "0.0040 / 12.50", "2.5"]
