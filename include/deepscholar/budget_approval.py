"""The benchmark DAG's budget gate: an Airflow human-in-the-loop approval, asked only when it is needed.

The task before it (`estimate_budget`) prices the month's planned judge jobs against the budget
(evaluation/budget.py `estimate_for_jobs`). Within the budget this task succeeds at once and asks nobody.
Over it, or when a judge model has no price, it asks in the UI (Required actions) and the REST API, with the
estimate by system, metric and model, and waits in Airflow's `awaiting_input` state (no worker slot, no
triggerer) for Approve or Reject, at most DEEPSCHOLAR_JUDGE_BUDGET_APPROVAL_HOURS. Approved, the judge tasks
run, held to the approved total (plus the margin). Rejected or unanswered, the task fails with one line
saying why and what the month would have cost (also pushed as the XCom `refusal`, which the run's `finish`
writes into benchmark_runs), so the judge tasks never start and nothing is sent.

Airflow's own operator does the asking; this subclass adds the two things it lacks here: not asking when
nothing needs approving, and a rejection that ends the run with the reason instead of skipping on quietly.
Imported by the DAG file only (it needs Airflow's standard provider).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException

__all__ = ["BudgetApproval", "REFUSAL_KEY"]

REFUSAL_KEY = "refusal"


class BudgetApproval(ApprovalOperator):
    """Approve or reject a month's judging predicted over its budget; `estimate_task_id` names the task whose
    return value is the estimate (`estimate_for_jobs`)."""

    def __init__(self, *, estimate_task_id: str, **kwargs: Any) -> None:
        self.estimate_task_id = estimate_task_id
        super().__init__(**kwargs)

    def _estimate(self, context: Any) -> dict:
        return context["ti"].xcom_pull(task_ids=self.estimate_task_id) or {}

    def execute(self, context: Any) -> Any:
        estimate = self._estimate(context)
        if not estimate.get("needs_approval"):
            self.log.info("no approval needed: %s", estimate.get("line", "no estimate"))
            return {"asked": False, "approved": True}
        self.log.info("asking for approval: %s", estimate["line"])
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        line = self._estimate(context).get("line", "judging over its budget")
        if "error" in event:
            reason = ("nobody answered within " + str(self.response_timeout) if event.get("error_type") == "timeout"
                      else f"the approval failed ({event.get('error')})")
            self._refuse(context, f"{reason}: {line}; nothing was sent")
        if list(event.get("chosen_options") or []) == [self.REJECT]:
            who = event.get("responded_by_user") or {}
            name = (who.get("name") or who.get("id") or "an operator") if isinstance(who, dict) else str(who)
            self._refuse(context, f"rejected by {name}: {line}; nothing was sent")
        result = super().execute_complete(context, event)
        self.log.info("approved: %s", line)
        return result

    def _refuse(self, context: Any, message: str) -> None:
        """Fail with the reason, kept where the run's `finish` reads it: the XCom `refusal`, and the run's row
        in benchmark_runs (a failed task's XCom was once missing when `finish` read it)."""
        from deepscholar.db import get_engine
        from deepscholar.scheduling import note_run_message

        context["ti"].xcom_push(key=REFUSAL_KEY, value=message)
        release_id = self._estimate(context).get("release_id")
        if release_id:
            note_run_message(get_engine(), release_id, context["run_id"], message)
        raise AirflowFailException(message)
