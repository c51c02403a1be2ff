"""The benchmark DAG's budget gate: an Airflow human-in-the-loop approval, asked only when it is needed, and
answerable only by the operator's approvers.

Design notes: docs/MODULE_NOTES.md, `deepscholar.budget_approval`.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException

__all__ = ["BudgetApproval", "REFUSAL_KEY"]

REFUSAL_KEY = "refusal"


class BudgetApproval(ApprovalOperator):
    """Approve or reject a month's judging predicted over its budget, as the run's kept estimate says."""

    def _estimate(self, context: Any) -> dict:
        from deepscholar.db import get_engine
        from deepscholar.evaluation.money.budget import run_estimate

        return run_estimate(get_engine(), context["run_id"]) or {}

    def execute(self, context: Any) -> Any:
        from deepscholar.settings import current_settings

        estimate = self._estimate(context)
        line = (estimate.get("detail") or "no estimate").split("\n\n")[0]
        if not estimate.get("needs_approval"):
            self.log.info("no approval needed: %s", line)
            return {"asked": False, "approved": True}
        approvers = current_settings().judge_budget_approvers
        self.assigned_users = [{"id": user, "name": user} for user in approvers]
        self.subject = f"Approve judging {estimate['release_id']} under {estimate['judge_config']} over its budget?"
        self.body = (f"{estimate['detail']}\n\nOnly {', '.join(approvers)} may answer "
                     "(DEEPSCHOLAR_JUDGE_BUDGET_APPROVERS).")
        self.log.info("asking %s for approval: %s", ", ".join(approvers), line)
        from deepscholar.notifications.callbacks import approval_asked

        approval_asked(context, estimate, list(approvers))  # `approval_asked`; never raises
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from deepscholar.db import get_engine
        from deepscholar.evaluation.money.budget import approve_estimate

        estimate = self._estimate(context)
        line = (estimate.get("detail") or "judging over its budget").split("\n\n")[0]
        if "error" in event:
            reason = ("nobody answered within " + str(self.response_timeout) if event.get("error_type") == "timeout"
                      else f"the approval failed ({event.get('error')})")
            self._refuse(context, estimate, f"{reason}: {line}; nothing was sent")
        who = event.get("responded_by_user") or {}
        name = (who.get("name") or who.get("id") or "an operator") if isinstance(who, dict) else str(who)
        if list(event.get("chosen_options") or []) == [self.REJECT]:
            self._refuse(context, estimate, f"rejected by {name}: {line}; nothing was sent")
        result = super().execute_complete(context, event)
        total = approve_estimate(get_engine(), estimate, name)
        self.log.info("approved by %s, a month of $%.4f: %s", name, total, line)
        return result

    def _refuse(self, context: Any, estimate: dict, message: str) -> None:
        """Fail with the reason, kept where the run's `finish` reads it: the XCom `refusal`, and the run's row
        in benchmark_runs (a failed task's XCom was once missing when `finish` read it)."""
        from deepscholar.db import get_engine
        from deepscholar.scheduling import note_run_message

        context["ti"].xcom_push(key=REFUSAL_KEY, value=message)
        if estimate.get("release_id"):
            note_run_message(get_engine(), estimate["release_id"], context["run_id"], message)
        raise AirflowFailException(message)
