"""Relevance rate (METRICS.md, Retrieval quality): how relevant the arXiv papers a report cites are.

Definition: docs/METRICS.md, "`relevance_rate`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.core.relevance_rate`.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import (
    AnnotationUnit,
    Item,
    ItemJudgment,
    LLMJudgedMetric,
    QueryInfo,
    ReportContext,
    Score,
    SourceDoc,
)
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import ParseError, parse_json_object

__all__ = ["RelevanceRate", "METRIC", "GRADES", "DIRECT_COSINE", "RELATED_COSINE", "parse_grade",
           "source_fields", "relevance_rate"]

NAME = "relevance_rate"
GRADES = (0, 1, 2)  # off-topic, related background, directly relevant prior work
# Local judge: cosine between the source's title+abstract and the query paper's title+abstract.
DIRECT_COSINE = 0.55
RELATED_COSINE = 0.20


def parse_grade(text: str) -> tuple[int, str]:
    obj = parse_json_object(text)
    grade, explanation = obj.get("grade"), obj.get("explanation")
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        raise ParseError('"grade" must be the number 0, 1 or 2')
    if not isinstance(explanation, str) or not explanation.strip():
        raise ParseError('"explanation" must be a non-empty string')
    return grade, explanation.strip()


def source_fields(source: SourceDoc) -> tuple[str, str]:
    """(title, text) the judge reads: the corpus abstract when known, else what the report stored."""
    title = " ".join((source.title or "").split()) or "(unknown)"
    body = source.abstract if source.abstract and source.abstract.strip() else source.text
    return title, " ".join((body or "").split()) or "(none)"


def relevance_rate(grades: Sequence[int]) -> float:
    """METRICS.md: RR = sum / (2 |S|), and 0 for a report that cites no arXiv source."""
    return sum(grades) / (2 * len(grades)) if grades else 0.0


def _query_text(query: QueryInfo) -> str:
    return ". ".join(x.strip() for x in (query.title, query.abstract) if x and x.strip())


class RelevanceRate(LLMJudgedMetric):
    name = NAME
    dimension = "retrieval_quality"
    position = 1  # column within the dimension
    label = "Rel rate"  # the leaderboard's column heading (Table 2)
    headline = "score"
    calls_per_report = 3.5  # balances judge tasks only (evaluation.jobs)
    variants = ("score",)
    prompt_name = "relevance_rate_v2"
    definition = "d2"  # d2: one item per cited paper with an arXiv key (d1: per stored id as written)
    paper_human_agreement = 0.70  # the DeepScholar paper's judge-human agreement

    annotation_question = ("How relevant is this cited paper to the query paper's related work? "
                           "2 = directly relevant prior work, 1 = related background, 0 = off-topic.")
    annotation_labels = tuple(str(g) for g in reversed(GRADES))

    def items(self, report: ReportContext) -> list[Item]:
        return [Item(f"src:{paper.arxiv_key}", paper.first_with_arxiv_id()) for paper in report.cited_arxiv_papers]

    def annotation_units(self, report: ReportContext, item: Item, label: dict | None) -> list[AnnotationUnit]:
        title, text = source_fields(item.payload)
        return [AnnotationUnit("", {"source_title": title, "source_text": text},
                               None if label is None else str(label["grade"]))]

    def prompt_fields(self, report: ReportContext, item: Item) -> dict:
        title, text = source_fields(item.payload)
        query = report.query
        # Nothing of the report itself goes in: the same source is one cached question per query.
        return {"title": query.title, "abstract": query.abstract, "section": (query.exemplar_text or "").strip(),
                "source_title": title, "source_text": text}

    def parse(self, text: str, item: Item) -> tuple[int, str]:
        return parse_grade(text)

    def answer_schema(self, item: Item) -> dict:
        return answer_shapes.object_schema({"grade": {"type": "integer", "enum": sorted(GRADES)},
                                            "explanation": answer_shapes.TEXT})

    def label_of(self, item: Item, answer: tuple[int, str]) -> tuple[dict, str]:
        grade, explanation = answer
        return {"grade": grade}, explanation

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm import local_judge

        items = list(items)
        if not items:
            return []
        texts = [". ".join(source_fields(item.payload)) for item in items]
        cosines = local_judge.similarity(texts, [_query_text(report.query)])[:, 0]
        out = []
        for item, cosine in zip(items, cosines, strict=True):
            cosine = round(float(cosine), 4)
            grade = 2 if cosine >= DIRECT_COSINE else 1 if cosine >= RELATED_COSINE else 0
            out.append(ItemJudgment(item.key, {"grade": grade}, explanation=(
                f"local embedding judge ({local_judge.MODEL_ID}), not an LLM: cosine {cosine:.3f} between "
                f"the source's title+abstract and the query paper's title+abstract; grade 2 at >= "
                f"{DIRECT_COSINE}, 1 at >= {RELATED_COSINE}, else 0")))
        return out

    def score_judged(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        expected = [f"src:{a}" for a in report.cited_arxiv_ids]
        if not expected:
            return [Score("score", 0.0, details={"n_sources": 0, "why": (
                "the report cites no arXiv source: it retrieved nothing (METRICS.md: RR = 0)")})]
        grade_of = {j.key: j.label["grade"] for j in judgments}
        missing = [k for k in expected if k not in grade_of]
        if missing:
            # |S| is the denominator whatever was judged: a missing source is not dropped from it.
            return [Score("score", None, f"{len(missing)} of {len(expected)} cited sources have no grade "
                          f"(first: {missing[0]})", n_items=len(judgments))]
        grades = [grade_of[k] for k in expected]
        counts = {str(g): grades.count(g) for g in GRADES}
        return [Score("score", relevance_rate(grades), n_items=len(judgments),
                      details={"n_sources": len(grades), "grades": counts})]


METRIC = RelevanceRate()
