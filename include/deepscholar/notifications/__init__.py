"""Telling the operator: messages for the DAGs' events (messages.py, pure), sent through Airflow's notifiers
to the connections DEEPSCHOLAR_NOTIFY routes each event to (notifiers.py), from the DAGs' callbacks and the
benchmark DAG's publication deadline (callbacks.py). docs/RUNBOOK.md says what each event means and what
fixes it."""

__all__ = ["callbacks", "messages", "notifiers"]
