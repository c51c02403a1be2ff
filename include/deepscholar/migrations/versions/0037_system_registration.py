"""System names are one system whatever their case, and a system remembers whether the page registered it
(its `api_base` then stays under DEEPSCHOLAR_WEB_API_BASES when it runs)."""

from deepscholar.migrations import run_sql

revision = "0037_system_registration"
down_revision = "0036_score_versions"


def upgrade() -> None:
    run_sql(revision)
