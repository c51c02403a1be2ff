"""Names shared between the DAG files and the library (kept free of Airflow imports)."""

RELEASE_DAG_ID = "deepscholar_release"
RELEASE_ASSET_NAME = "deepscholar_release"
# The published release lives in the warehouse table deepscholar.releases.
RELEASE_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/releases"
MONTHLY_CRON = "0 0 1 * *"
BENCHMARK_DAG_ID = "deepscholar_benchmark"
# Airflow's default max_map_length is 1024: stay under it by batching pairs beyond this many tasks.
MAX_MAPPED_TASKS = 1000
