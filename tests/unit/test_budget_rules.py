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


class Warehouse:
    """llm_calls as a limit reads it: each stored answer's key, budget and cost; `during_read` runs between
    the read's snapshot and its return (what another thread does meanwhile)."""

    def __init__(self, scope: str = "judging/2025-06") -> None:
        self.scope = scope
        self.rows: dict[str, tuple[str, float]] = {}
        self.reads = 0
        self.during_read: list = []

    def store(self, key: str, usd: float) -> None:
        self.rows[key] = (self.scope, usd)

    def audited(self, pending):
        self.reads += 1
        snapshot = dict(self.rows)
        while self.during_read:
            self.during_read.pop(0)()
        seen = [k for k, budget in pending.items() if k in snapshot and snapshot[k][0] == budget]
        return sum(usd for _, usd in snapshot.values()), seen


def test_judge_tasks_spending_at_once_stop_together_at_the_limit_not_each_at_its_own():
    """Each task's limit reads the warehouse (every task's stored answers) again each time it spent a tenth of
    the room left, so the others' spend shows long before the 30 s refresh, and more often near the limit."""
    warehouse = Warehouse()
    tasks = [SpendLimit(1.0, "judging 2025-06", audited=warehouse.audited, refresh_seconds=30.0) for _ in range(4)]
    running = list(tasks)
    while running:  # the four tasks take turns, one request each
        for task in list(running):
            try:
                task.before_request()
            except OverBudget:
                running.remove(task)
                continue
            key = f"answer-{len(warehouse.rows)}"
            warehouse.store(key, 0.01)  # its answer, stored, then told to its limit
            task.record(0.01, 0.01, request_hash=key, billed_to=warehouse.scope)
    # Past the $1.00 limit by at most one request per task (those sent on a figure read just before).
    spent = sum(usd for _, usd in warehouse.rows.values())
    assert 1.0 < spent <= 1.0 + 4 * 0.01 + 1e-9, spent
    assert warehouse.reads < 4 * 100  # far fewer reads than requests while far from the limit
    assert READ_SHARE == 0.1


def test_an_answer_recorded_while_the_spend_is_read_counts_once_whenever_it_was_stored():
    """Another thread's answer can be recorded while a read runs, stored before or after the read's snapshot.
    After the snapshot, the figure misses it and the limit must still count it (else one more request passes
    the limit); before, the figure holds it and counting it again would stop early, at a wrong figure."""
    warehouse = Warehouse()
    limit = SpendLimit(0.7, "judging 2025-06", audited=warehouse.audited)
    warehouse.store("a", 0.3)
    limit.record(0.3, 0.3, request_hash="a", billed_to=warehouse.scope)

    def stored_after_the_snapshot():
        warehouse.store("b", 0.2)
        limit.record(0.2, 0.2, request_hash="b", billed_to=warehouse.scope)

    warehouse.during_read.append(stored_after_the_snapshot)
    limit.refreshed()
    assert limit.spent == pytest.approx(0.5)  # 0.3 read, 0.2 recorded during the read
    limit.before_request()  # the next read sees b: still 0.5
    assert limit.refreshed() == pytest.approx(0.5)

    # Stored before a read's snapshot and recorded only after it: counted once, so no stop at $0.80.
    warehouse.store("c", 0.15)
    limit.refreshed()
    limit.record(0.15, 0.15, request_hash="c", billed_to=warehouse.scope)
    assert limit.spent == pytest.approx(0.8)  # until a read says the figure holds it ...
    limit.before_request()  # ... which the limit asks before it stops
    assert limit.spent == pytest.approx(0.65)
    # One more answer passes $0.70: the stop names the figure with each answer counted once.
    warehouse.store("d", 0.1)
    limit.record(0.1, 0.1, request_hash="d", billed_to=warehouse.scope)
    with pytest.raises(OverBudget, match=r"stopped at \$0\.75 of \$0\.70"):
        limit.before_request()


def test_an_answer_billed_elsewhere_is_not_taken_as_read():
    """An answer the figure's budgets do not hold (stored under another budget) stays counted beside it."""
    warehouse = Warehouse()
    limit = SpendLimit(1.0, "judging 2025-06", audited=warehouse.audited)
    warehouse.rows["x"] = ("release/2025-06", 0.4)
    limit.record(0.4, 0.4, request_hash="x", billed_to="judging/2025-06")
    assert limit.refreshed() == pytest.approx(0.4 + 0.4)  # the warehouse's own figure, and x beside it


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
