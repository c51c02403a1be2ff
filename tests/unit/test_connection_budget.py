"""The deployment's worst-case warehouse connections, from the settings an operator sets."""

from __future__ import annotations

import pytest

from deepscholar.connection_budget import compute_budget, describe_budget
from deepscholar.settings import Settings

EMBEDDED = "postgresql+psycopg2://postgres:@/deepscholar?host=/srv/ds/pgdata"
SERVER = "postgresql+psycopg2://deepscholar@benchmark-db:5432/deepscholar"


def test_defaults_count_judge_tasks_other_tasks_page_and_cli():
    budget = compute_budget(Settings.from_env({}), environ={})
    # Airflow's parallelism 32: 8 judge tasks (4 per run, 2 runs) x (6 + the lock connection), 24 other tasks
    # x 4, page + CLI 2 x 4 + the CLI's lock connection.
    assert (budget.judge_processes, budget.warehouse) == (8, 8 * 7 + 24 * 4 + 2 * 4 + 1)
    assert budget.airflow_same_server is None and budget.worst_case == 161


@pytest.mark.parametrize(("metadata", "same"), [
    ("postgresql://airflow@/airflow?host=/srv/ds/pgdata", True),   # the demo: both on the embedded server
    ("postgresql+psycopg2://airflow:airflow@postgres:5432/airflow", False),  # compose: a server of its own
    ("sqlite:////tmp/airflow.db", False),
])
def test_airflow_metadata_counts_only_on_the_same_server(metadata, same):
    environ = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata, "AIRFLOW__CORE__PARALLELISM": "8",
               "AIRFLOW__API__WORKERS": "2", "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": "3",
               "AIRFLOW__DATABASE__SQL_ALCHEMY_MAX_OVERFLOW": "2"}
    budget = compute_budget(Settings.from_env({}), environ=environ, warehouse_url=EMBEDDED)
    assert budget.airflow_same_server is same
    # scheduler, dag-processor, triggerer and two API workers, each 3 + 2.
    assert budget.airflow == (5 * 5 if same else 0)
    assert budget.warehouse == 8 * 7 + 0 * 4 + 3 * 4 + 1


def test_the_settings_move_the_sum_and_fewer_task_slots_cap_the_judges():
    settings = Settings.from_env({"DEEPSCHOLAR_DB_POOL_SIZE": "2", "DEEPSCHOLAR_JUDGE_DB_POOL_SIZE": "5",
                                  "DEEPSCHOLAR_JUDGE_TASKS": "8"})
    budget = compute_budget(settings, environ={"AIRFLOW__CORE__PARALLELISM": "4"}, warehouse_url=SERVER)
    assert budget.judge_processes == 4 and budget.worst_case == 4 * 6 + 2 * 2 + 1


def test_without_a_server_the_limit_is_unknown_not_guessed():
    budget, limit, lines = describe_budget(None, Settings.from_env({}), environ={})
    assert limit is None and lines[-1].startswith("server limit:       unknown")
    assert any(line.startswith("worst case:         161") for line in lines)
