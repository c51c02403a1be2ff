"""judge_claims_holder covers a claim's whole key after its holder, so releasing and renewing a holder's
claims read only those rows (deepscholar/evaluation/claims.py)."""

from deepscholar.migrations import run_sql

revision = "0012_judge_claims_holder_key"
down_revision = "0011_judge_claims"


def upgrade() -> None:
    run_sql(revision)
