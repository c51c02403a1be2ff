"""RACE, dimension instruction_following alone: S_d(report) / (S_d(report) + S_d(human section)); see base.py (this folder).

Definition: docs/METRICS.md, "RACE track (`race`), dimension Quality vs the human section".
"""

from deepscholar.evaluation.metrics.race.base import RaceMetric


class RaceInstructionFollowing(RaceMetric):
    name = "race_instruction_following"
    position = 4
    label = "Instr"
    race_dimension = "instruction_following"


METRIC = RaceInstructionFollowing()
