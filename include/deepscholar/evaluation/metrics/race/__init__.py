"""The RACE track (DeepResearch Bench): a report against the human section on four rubric dimensions
weighted per query. Its rubric is made at release time (rubrics.py) and read per query (query_data.py)."""

from deepscholar.evaluation.metrics.race.query_data import QUERY_DATA
from deepscholar.evaluation.metrics.registry import Dimension, Family

FAMILY = Family("race", "RACE", 2, ranking_metric="race_overall")
DIMENSIONS = (Dimension("reference_relative_quality", "Quality vs the human section", "race", 1),)
__all__ = ["FAMILY", "DIMENSIONS", "QUERY_DATA"]
