"""RACE, dimension comprehensiveness alone: S_d(report) / (S_d(report) + S_d(human section)); see base.py (this folder).

Definition: docs/METRICS.md, "RACE track (`race`), dimension Quality vs the human section".
"""

from deepscholar.evaluation.metrics.race.base import RaceMetric


class RaceComprehensiveness(RaceMetric):
    name = "race_comprehensiveness"
    position = 2
    label = "Compr"
    race_dimension = "comprehensiveness"


METRIC = RaceComprehensiveness()
