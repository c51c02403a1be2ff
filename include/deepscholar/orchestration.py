"""Names shared between the DAG files and the library (kept free of Airflow imports)."""

RELEASE_DAG_ID = "deepscholar_release"
RELEASE_ASSET_NAME = "deepscholar_release"
# The published release lives in the warehouse table deepscholar.releases.
RELEASE_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/releases"
MONTHLY_CRON = "0 0 1 * *"
