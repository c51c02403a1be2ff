"""RACE, dimension readability alone: S_d(report) / (S_d(report) + S_d(human section)); see base.py (this folder).

Definition: docs/METRICS.md, "RACE track (`race`), dimension Quality vs the human section".
"""

from deepscholar.evaluation.metrics.race.base import RaceMetric


class RaceReadability(RaceMetric):
    name = "race_readability"
    position = 5
    label = "Read"
    race_dimension = "readability"


METRIC = RaceReadability()
