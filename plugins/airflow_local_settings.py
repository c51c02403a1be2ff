"""Airflow imports `airflow_local_settings` in each of its processes (the plugins folder is on its
sys.path). We use it for one thing: the scheduler and Celery workers import the judge path's heavy
modules once, before they fork task processes (deepscholar/warm.py), so no judge task pays that import.
No Airflow setting is overridden here."""

from deepscholar.warm import warm_airflow_process

warm_airflow_process()

__all__: list[str] = []  # nothing for Airflow to take over into its settings or policies
