"""Human labels for judge validation: annotation items, the samples exported for labelling, and each
annotator's labels with their history."""

from deepscholar.migrations import run_sql

revision = "0021_annotations"
down_revision = "0020_paper_licences"


def upgrade() -> None:
    run_sql(revision)
