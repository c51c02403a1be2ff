"""The labelled title pairs of the shared dataset slice (evaluation/title_evidence.py), for the title rule's
test and bench/title_rule.py: the dataset's references and the six published outputs' sources, each output
read by the import formats."""

from __future__ import annotations

from pathlib import Path

from deepscholar.evaluation import title_evidence
from deepscholar.systems.external.formats import read_outputs


def official_entries(root: Path) -> list[title_evidence.TitledEntry]:
    """`root`: the slice's folder (`dataset/`, `system_outputs_paper0/<system>/`)."""
    outputs = root / "system_outputs_paper0"
    sources = [(folder.name, output.report.sources) for folder in sorted(p for p in outputs.iterdir() if p.is_dir())
               for output in read_outputs(folder) if output.report is not None]
    return title_evidence.dataset_entries(root / "dataset") + title_evidence.output_entries(sources)


def labelled_pairs(root: Path) -> title_evidence.LabelledSet:
    return title_evidence.label_pairs(official_entries(root))
