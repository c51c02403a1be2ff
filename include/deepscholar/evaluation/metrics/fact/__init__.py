"""The FACT track (DeepResearch Bench): how many of a report's citations support what they are cited for."""

from deepscholar.evaluation.metrics.registry import Dimension, Family

FAMILY = Family("fact", "FACT", 3, ranking_metric="citation_accuracy")
DIMENSIONS = (Dimension("citations", "Citations", "fact", 1),)
