"""RACE, dimension readability alone: S_d(report) / (S_d(report) + S_d(human section)); see base.py (this folder)."""

from deepscholar.evaluation.metrics.race.base import RaceMetric


class RaceReadability(RaceMetric):
    name = "race_readability"
    position = 5
    label = "Read"
    race_dimension = "readability"


METRIC = RaceReadability()
