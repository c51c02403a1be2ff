"""host_rate_limits: the next free request slot per external host, shared by every worker process of a
run so parallel tasks together keep each service's rate limit (deepscholar/rate_limit.py)."""

from deepscholar.migrations import run_sql

revision = "0007_host_rate_limits"
down_revision = "0006_resolution_cache"


def upgrade() -> None:
    run_sql(revision)
