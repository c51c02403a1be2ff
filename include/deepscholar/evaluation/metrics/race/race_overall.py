"""RACE overall: the report's weighted score relative to the human section's (0.5 = as good), docs/METRICS.md "RACE track".

Definition: docs/METRICS.md, "RACE track (`race`), dimension Quality vs the human section".
"""

from deepscholar.evaluation.metrics.race.base import RaceMetric


class RaceOverall(RaceMetric):
    name = "race_overall"
    position = 1
    label = "RACE"
    race_dimension = None  # the weighted sum over all four dimensions


METRIC = RaceOverall()
