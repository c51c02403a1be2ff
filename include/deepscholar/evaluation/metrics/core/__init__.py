"""DeepScholar-Bench's seven metrics, in the paper's three dimensions (Table 2's order): the core family,
whose board, geometric mean, wide SQL views and main page table are the benchmark's own."""

from deepscholar.evaluation.metrics.registry import CORE, Dimension, Family

FAMILY = Family(CORE, "DeepScholar-Bench", 1)
DIMENSIONS = (
    Dimension("knowledge_synthesis", "Knowledge synthesis", CORE, 1),
    Dimension("retrieval_quality", "Retrieval quality", CORE, 2),
    Dimension("verifiability", "Verifiability", CORE, 3),
)
