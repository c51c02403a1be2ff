"""RACE, dimension insight alone: S_d(report) / (S_d(report) + S_d(human section)); see base.py (this folder).

Definition: docs/METRICS.md, "RACE track (`race`), dimension Quality vs the human section".
"""

from deepscholar.evaluation.metrics.race.base import RaceMetric


class RaceInsight(RaceMetric):
    name = "race_insight"
    position = 3
    label = "Insight"
    race_dimension = "insight"


METRIC = RaceInsight()
