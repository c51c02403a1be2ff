"""Alembic's environment, run by deepscholar.migrations.upgrade on its own connection and transaction."""

from alembic import context

from deepscholar.migrations import run_environment

run_environment(context)
