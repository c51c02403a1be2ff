"""The ReportBench track: the bibliography against the human section's, and whether cited and uncited
statements hold."""

from deepscholar.evaluation.metrics.registry import Dimension, Family

FAMILY = Family("reportbench", "ReportBench", 4, ranking_metric="reference_recall")
DIMENSIONS = (
    Dimension("bibliography", "Bibliography", "reportbench", 1),
    Dimension("faithfulness", "Faithfulness", "reportbench", 2),
)
