"""What the claims track's three metrics share (claims_precision, claims_recall, claims_f1): the report's
predicted claims, the query's ground-truth claims, a one-to-one matching, and one batched judge call.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.claims.base`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deepscholar.evaluation.metrics.base import (
    BatchJudgedMetric,
    ExemplarReference,
    Item,
    ItemJudgment,
    ReportContext,
    Score,
    SourceDoc,
    judgments_in_order,
)
from deepscholar.evaluation.metrics.claims.query_data import gt_claims_of
from deepscholar.evaluation.metrics.fact.base import states_something
from deepscholar.evaluation.metrics.papers import TITLE_RULE, Paper, match_papers, resolve_papers
from deepscholar.text.citations import strip_citation_numbers

__all__ = ["ClaimsMetric", "Claims", "PredictedClaim", "TruthClaim", "Pair", "match_claims", "claim_totals",
           "GRADES", "VARIANTS", "RIGHT_GRADE", "ITEM_KEY", "LOCAL_GRADE_COSINES", "local_grade"]

GRADES = ("0", "1", "2", "3")  # what the judge may answer
RIGHT_GRADE = 2  # a connection graded at least this is right (binarised 1)
ITEM_KEY = "matched_pairs"
# score: a claim is (work + connection) / 2 (the paper's Eq. 1, partial credit); all_subclaims: 1 only when
# both sub-claims are right (the minimum over them); titles_only: 1 for a matched work, connection ignored.
VARIANTS = ("score", "all_subclaims", "titles_only")
# Local judge: (lowest cosine, grade), highest first; below the last, 0.
LOCAL_GRADE_COSINES = ((0.80, 3), (0.65, 2), (0.50, 1))


@dataclass(frozen=True)
class PredictedClaim:
    source: SourceDoc  # the work: the first-cited source of the paper
    numbers: tuple[int, ...]  # every [n] of the report naming it
    connection: str  # the sentences citing it, markers removed; "" when none states anything


@dataclass(frozen=True)
class TruthClaim:
    work: ExemplarReference  # the work as the matcher reads it (cite key, arXiv id, title, DOI)
    cite_keys: tuple[str, ...]
    connection: str


@dataclass(frozen=True)
class Pair:
    truth: TruthClaim
    predicted: PredictedClaim
    by: str  # "id", "doi" or "title"
    similarity: float | None

    @property
    def line(self) -> str:
        """The sub-item the judge grades; "" when the report says nothing about the work (graded 0, unasked)."""
        if not self.predicted.connection:
            return ""
        title = self.truth.work.title or self.predicted.source.title or "(title unknown)"
        return " ".join(f"Work: {title} | Exemplar: {self.truth.connection} | Report: "
                        f"{self.predicted.connection}".split())


@dataclass(frozen=True)
class Claims:
    predicted: tuple[PredictedClaim, ...]
    truth: tuple[TruthClaim, ...]
    pairs: tuple[Pair, ...]  # in ground-truth order


def _works(report: ReportContext) -> list[ExemplarReference]:
    return [ExemplarReference(c.cite_key, c.work_arxiv_id, c.work_title, None, True, c.work_doi)
            for c in gt_claims_of(report.query)]


def _predicted(report: ReportContext) -> list[tuple[Paper, PredictedClaim]]:
    papers = resolve_papers(report.cited_sources, known=_works(report))
    paper_of = {s.idx: g for g, paper in enumerate(papers) for s in paper.entries}
    statements: list[dict[str, None]] = [{} for _ in papers]
    for sentence in report.sentences:
        text = " ".join(strip_citation_numbers(sentence.text).split())
        if not states_something(text):
            continue
        for g in dict.fromkeys(paper_of[n] for n in sentence.citations if n in paper_of):
            statements[g][text] = None
    return [(paper, PredictedClaim(paper.first, tuple(s.idx for s in paper.entries), " ".join(said)))
            for paper, said in zip(papers, statements, strict=True)]


def _truth(report: ReportContext) -> list[tuple[Paper, TruthClaim]]:
    works = _works(report)
    connection_of = {id(w): " ".join(c.connection.split()) for w, c in zip(works, gt_claims_of(report.query), strict=True)}
    out = []
    for paper in resolve_papers(works, known=report.cited_sources):
        connections = dict.fromkeys(connection_of[id(w)] for w in paper.entries)
        out.append((paper, TruthClaim(paper.first, tuple(w.cite_key for w in paper.entries),
                                      "; ".join(c for c in connections if c))))
    return out


def match_claims(report: ReportContext) -> Claims:
    predicted, truth = _predicted(report), _truth(report)
    predicted_of = {id(paper): claim for paper, claim in predicted}
    truth_of = {id(paper): claim for paper, claim in truth}
    matches = match_papers([p for p, _ in predicted], [t for t, _ in truth])
    pairs = tuple(Pair(truth_of[id(m.reference)], predicted_of[id(m.source)], m.by, m.similarity) for m in matches)
    return Claims(tuple(c for _, c in predicted), tuple(c for _, c in truth), pairs)


def claim_totals(claims: Claims, grades: Sequence[int]) -> dict[str, dict[str, float]]:
    """Per variant (VARIANTS): precision, recall and F1 from the pairs' grades (in pair order)."""
    right = [g >= RIGHT_GRADE for g in grades]
    sums = {"score": sum((1 + r) / 2 for r in right), "all_subclaims": float(sum(right)),
            "titles_only": float(len(right))}
    out = {}
    for variant, total in sums.items():
        precision = total / len(claims.predicted) if claims.predicted else 0.0
        recall = total / len(claims.truth)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        out[variant] = {"sum": total, "precision": precision, "recall": recall, "f1": f1}
    return out


def local_grade(cosine: float) -> int:
    return next((grade for floor, grade in LOCAL_GRADE_COSINES if cosine >= floor), 0)


class ClaimsMetric(BatchJudgedMetric):
    """A claims metric: items, prompt, parsing, judges and arithmetic shared; a subclass names its quantity."""

    dimension = "prior_art_claims"
    headline = "score"
    variants = VARIANTS
    prompt_name = "claims_connection_v1"
    # d1: predicted claims read off the [n] markers (no extraction call), works matched without a call,
    # one batched call grading every matched pair's connection 0-3.
    # d2: works resolved to papers before counting (evaluation/metrics/papers.py: one paper under two keys is one
    # claim; a title match only where one side lacks the identifier the other has); variant `strict` renamed
    # `all_subclaims` (it is our minimum over a claim's two sub-claims, not a checked copy of anyone's);
    # variant `titles_only` added (LiveDRBench's released scorer: a matched work is a right claim).
    # d3: the title match is `text.same_title` (d2: similarity >= 0.8, which matched a cGAN citation to a GAN
    # claim when one side had no id); identifiers read in any written case.
    definition = "d3"
    labels = GRADES
    sub_item = "pair"
    quantity: str  # "precision", "recall" or "f1"
    # One call per report with a matched pair, made by whichever of the three is judged first (in a judge
    # task, the three metrics' units of a query shard run together); the others are answered from the cache.
    calls_per_report = 1.0  # balances judge tasks only (evaluation.jobs)

    @property
    def purpose(self) -> str:
        return "metric.claims"  # one question for the three metrics: one purpose in the audit trail

    def items(self, report: ReportContext) -> list[Item]:
        if not gt_claims_of(report.query):
            return []
        pairs = [p for p in match_claims(report).pairs if p.line]
        if not pairs:
            return []
        about = tuple(dict.fromkeys((p.line, p.truth.connection, p.predicted.connection) for p in pairs))
        return [self.batch(ITEM_KEY, [p.line for p in pairs], about)]

    def batch_fields(self, report: ReportContext, item: Item) -> dict[str, Any]:
        return {"title": report.query.title}

    # Judge validation: one unit per matched pair (BatchJudgedMetric), graded as the judge grades it.
    annotation_question = ("The query paper's authors and a generated report both describe how the paper relates "
                           "to the same earlier work. How well does the report's description match the authors'? "
                           "3 = closely matches, 2 = the main idea but misses a key detail, 1 = some overlap, "
                           "0 = wrong or unrelated.")
    annotation_labels = tuple(reversed(GRADES))

    def annotation_content(self, report: ReportContext, item: Item, fields: dict[str, Any],
                           text: str) -> dict[str, str]:
        """The work, what the exemplar says about it and what the report says, as three fields (the query
        title the prompt also gets is in every annotation file anyway)."""
        for line, truth, said in item.payload.about:
            if line == text:
                suffix = f" | Exemplar: {truth} | Report: {said}"
                work = text[len("Work: "):-len(suffix)] if text.startswith("Work: ") and text.endswith(suffix) else ""
                return {"work": work or "(title unknown)", "authors_connection": truth, "report_connection": said}
        return {"pair": text}

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm import local_judge

        out = []
        for item in items:
            about = {line: (truth, said) for line, truth, said in item.payload.about}
            truths = [about[line][0] for line in item.payload.texts]
            saids = [about[line][1] for line in item.payload.texts]
            sims = local_judge.similarity(truths, saids)
            cosines = [round(float(sims[i, i]), 4) for i in range(len(truths))]
            grades = [str(local_grade(c)) for c in cosines]
            shown = ", ".join(f"#{n} {c:.3f} -> {g}" for n, (c, g) in enumerate(zip(cosines, grades, strict=True), 1))
            floors = ", ".join(f">= {floor} -> {grade}" for floor, grade in LOCAL_GRADE_COSINES)
            out.append(ItemJudgment(item.key, self._labelled(item, grades), explanation=(
                f"local embedding judge ({local_judge.MODEL_ID}), not an LLM: each pair graded by the cosine "
                f"between the exemplar's and the report's connection ({floors}, else 0): {shown}")))
        return out

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if gt_claims_of(report.query):
            return None
        n_important = sum(bool(r.is_important) for r in report.query.exemplar_references)
        if n_important:
            reason = (f"no ground-truth claims for query {report.arxiv_id} in release {report.release_id} although "
                      f"its exemplar has {n_important} important reference(s): run `deepscholar release enrich "
                      f"{report.release_id} --tracks claims`")
        else:
            reason = ("the exemplar has no important reference, so the query has no ground-truth claim (#GT = 0): "
                      "it cannot be scored on the claims track")
        return [Score(v, None, reason, details={"n_gt": 0}) for v in self.variants]

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        return judgments_in_order(self.items(report), judgments, "no judgment for the matched pairs")

    def score_judged(self, report: ReportContext, ordered: Sequence[ItemJudgment]) -> list[Score]:
        claims = match_claims(report)
        graded = {text: int(label) for j in ordered for text, label in self.sub_labels(j, GRADES)}
        ungraded = [p for p in claims.pairs if p.line and p.line not in graded]
        if ungraded:
            reason = (f"{len(ungraded)} matched pair(s) have no grade in the stored judgment; first: "
                      f"{ungraded[0].truth.cite_keys[0]}")
            return [Score(v, None, reason, n_items=len(ordered)) for v in self.variants]
        grades = [graded[p.line] if p.line else 0 for p in claims.pairs]
        totals = claim_totals(claims, grades)
        matched = {id(p.predicted) for p in claims.pairs} | {id(p.truth) for p in claims.pairs}
        details = {
            "n_predicted": len(claims.predicted), "n_gt": len(claims.truth), "n_matched": len(claims.pairs),
            "n_connection_right": sum(g >= RIGHT_GRADE for g in grades), "title_rule": TITLE_RULE,
            "matched": [{"cite_keys": list(p.truth.cite_keys), "source_idx": list(p.predicted.numbers), "by": p.by,
                         **({"similarity": round(p.similarity, 4)} if p.similarity is not None else {}),
                         "grade": g, **({} if p.line else {"unasked": "the report says nothing about it"})}
                        for p, g in zip(claims.pairs, grades, strict=True)],
            "unmatched_gt": [k for t in claims.truth if id(t) not in matched for k in t.cite_keys],
            "unmatched_sources": [p.numbers[0] for p in claims.predicted if id(p) not in matched],
        }
        n = len(ordered)
        return [Score(v, totals[v][self.quantity], n_items=n, details={**details, **totals[v]}) for v in self.variants]
