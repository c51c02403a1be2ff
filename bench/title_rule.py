"""The title rule on the published DeepScholar-bench slice: the labelled title pairs and each candidate
rule's figures (evaluation/title_evidence.py), then what the kept rule (text.same_title) changes against
definition d2's title step (similarity >= 0.8) on the slice's month: the official dataset imported as a
release and the six published outputs as external systems' reports (as bench/evaluation.py --reports real).

Usage: .venv/bin/python bench/title_rule.py [--systems N]
--systems N imports only the first N outputs in name order (the test runs it with 1).

Prints one JSON object: `labelled` (pair counts), `rules` (per candidate: true and false matches, misses,
precision, recall), `kept`, and `month`: per system, the reports, the title matches the new rule removed
and added against d2's (reference, source number, titles), the scores that changed (metric, variant, query:
before -> after) for the metrics whose matching uses the title step and can be scored on the slice
(reference_precision, reference_recall: the slice's exemplars carry no importance labels, so
reference_coverage and the claims track are unscored there under both rules, and that is counted), and
the one-resolver change of part 2: |S| counted as stored ids (d1 of relevance_rate and document_importance)
and as papers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def labelled_figures(root: Path) -> dict:
    from support.title_pairs import labelled_pairs

    from deepscholar.evaluation import title_evidence

    labelled = labelled_pairs(root)
    table = title_evidence.figures(labelled)
    return {"labelled": {"same_paper_pairs": len(labelled.positives), "different_paper_pairs": len(labelled.negatives),
                         "conflicts": labelled.conflicts},
            "rules": [f.as_dict() for f in table], "kept": title_evidence.kept_rule(table).rule}


def _matches(bib) -> dict[tuple, dict]:
    return {(m.reference.first.cite_key, m.source.first.idx): {
        "reference": m.reference.first.cite_key, "source": m.source.first.idx, "by": m.by,
        "reference_title": m.reference.titles[0] if m.reference.titles else None,
        "source_title": m.source.titles[0] if m.source.titles else None} for m in bib.matches}


def report_changes(ctx) -> dict:
    """One report under d2's title step and the kept rule: matches removed and added, scores that changed."""
    from deepscholar.evaluation.metrics.core.reference_coverage import METRIC as REFERENCE_COVERAGE
    from deepscholar.evaluation.metrics.reportbench.base import bibliography
    from deepscholar.evaluation.metrics.reportbench.reference_precision import ReferencePrecision
    from deepscholar.evaluation.metrics.reportbench.reference_recall import ReferenceRecall
    from deepscholar.evaluation.title_evidence import SIMILARITY_D2

    old, new = _matches(bibliography(ctx, SIMILARITY_D2)), _matches(bibliography(ctx))
    changed = []
    for metric in (ReferencePrecision, ReferenceRecall):
        before = {s.variant: s.value for s in metric(SIMILARITY_D2).score(ctx, [])}
        after = {s.variant: s.value for s in metric().score(ctx, [])}
        changed += [{"metric": metric.name, "variant": v, "query": ctx.arxiv_id, "before": before[v], "after": after[v]}
                    for v in before if before[v] != after[v]]
    (coverage,) = REFERENCE_COVERAGE.score(ctx, [])
    return {"removed": [old[k] for k in old.keys() - new.keys()], "added": [new[k] for k in new.keys() - old.keys()],
            "changed": changed, "n_matches_d2": len(old), "n_matches_kept": len(new),
            "reference_coverage_unscored": coverage.value is None,
            "claims_ground_truth": len(ctx.query.family_data.get("claims", ())),
            "s_as_stored_ids": len({s.arxiv_id for s in ctx.cited_sources if s.arxiv_id}),
            "s_as_papers": len(ctx.cited_arxiv_papers)}


def month_changes(systems: int | None) -> dict:
    import sqlalchemy as sa
    from evaluation import build_real_month
    from support.warehouse import throwaway_warehouse

    from deepscholar.evaluation.judging.report_contexts import load_reports

    with throwaway_warehouse("deepscholar_bench_title_", database="auto") as (engine, home):
        month = build_real_month(engine, home, systems)
        with engine.connect() as conn:
            ids = conn.execute(sa.text("SELECT report_id FROM deepscholar.reports WHERE release_id = :r "
                                       "AND status = 'ok' ORDER BY system_id, arxiv_id"), {"r": month}).scalars().all()
        contexts = load_reports(engine, list(ids))
    out: dict[str, dict] = {}
    for ctx in contexts:
        row = out.setdefault(ctx.system_id, {"reports": 0, "removed": [], "added": [], "changed": [],
                                             "n_matches_d2": 0, "n_matches_kept": 0, "reference_coverage_unscored": 0,
                                             "claims_ground_truth": 0, "s_as_stored_ids": 0, "s_as_papers": 0})
        one = report_changes(ctx)
        row["reports"] += 1
        for key, value in one.items():
            row[key] += value
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=None, help="import only the first N outputs (name order)")
    args = parser.parse_args()
    from support.shared_data import shared_root

    root = shared_root() / "deepscholar_official"
    if not (root / "system_outputs_paper0").is_dir():
        raise SystemExit(f"bench/title_rule.py needs the shared fixtures: {root} is missing")
    result = labelled_figures(root)
    result["month"] = month_changes(args.systems)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
