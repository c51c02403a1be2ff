"""RACE (after DeepResearch Bench): a report graded relative to the human related-work section on criteria
made for its query at release time (evaluation/metrics/race/rubrics.py). Shared by the five race_* metrics.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.race.base`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from deepscholar.evaluation.metrics.base import (
    AnnotationUnit,
    Item,
    ItemJudgment,
    LLMJudgedMetric,
    ReportContext,
    Score,
)
from deepscholar.evaluation.metrics.race.query_data import rubric_of
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import ParseError, parse_json_array
from deepscholar.text.citations import reference_spans, strip_citation_numbers
from deepscholar.text.markers import strip_citation_markers
from deepscholar.text.sentences import split_exemplar_sentences

__all__ = ["RaceMetric", "race_scores", "article_text", "reference_text", "parse_criterion_scores", "MAX_SCORE",
           "comparison_label", "TIE_MARGIN", "CriterionGrade"]

MAX_SCORE = 10.0
ITEM_KEY = "rubric"
HUMAN_SCORE = 0.5
# Judge validation: a human compares the two articles on one criterion; the judge's two scores read as
# "about equal" when they differ by at most this (one point of ten), else the higher one is better.
REPORT_BETTER, ABOUT_EQUAL, HUMAN_BETTER = "report_better", "about_equal", "human_better"
TIE_MARGIN = 1.0


def comparison_label(article_1: float, article_2: float) -> str:
    """A criterion's two judge scores as the comparison a human gives (TIE_MARGIN)."""
    if abs(article_1 - article_2) <= TIE_MARGIN:
        return ABOUT_EQUAL
    return REPORT_BETTER if article_1 > article_2 else HUMAN_BETTER


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def article_text(markdown: str) -> str:
    """A report as RACE's judge reads it: reference lists and numbered citation markers removed, paragraphs kept."""
    lines = (markdown or "").splitlines()
    dropped = {i for start, end in reference_spans(lines) for i in range(start, end)}
    kept = "\n".join(line for i, line in enumerate(lines) if i not in dropped)
    return "\n\n".join(s for s in (strip_citation_numbers(p) for p in _paragraphs(kept)) if s)


def reference_text(section: str) -> str:
    """The human section as the reference article: its [@key] markers removed, paragraphs kept."""
    return "\n\n".join(s for s in (strip_citation_markers(p) for p in _paragraphs(section or "")) if s)


def _criteria(report: ReportContext) -> list[dict]:
    return [{"dimension": d.name, "dimension_weight": d.weight, "criterion": c.criterion,
             "explanation": c.explanation, "weight": c.weight}
            for d in rubric_of(report.query) for c in d.criteria]


class CriterionGrade(NamedTuple):
    """The judge's answer on one criterion: its comparative analysis, then both articles' scores."""

    analysis: str
    article_1: float
    article_2: float


CRITERION_ANSWER_TOKENS = 240  # one criterion's analysis and scores, at most (answer_budget)


def parse_criterion_scores(text: str, count: int) -> list[CriterionGrade]:
    """Exactly `count` {"analysis": "...", "article_1": s, "article_2": s} objects, in the criteria's order,
    strictly: a non-empty analysis and both scores in [0, 10] on each (other keys are ignored)."""
    answers = parse_json_array(text)
    if len(answers) != count:
        raise ParseError(f"expected exactly {count} objects, one per criterion, got {len(answers)}")
    out = []
    for n, answer in enumerate(answers, 1):
        if not isinstance(answer, dict):
            raise ParseError(f"criterion {n}: expected an object with analysis, article_1 and article_2")
        analysis = answer.get("analysis")
        if not isinstance(analysis, str) or not analysis.strip():
            raise ParseError(f'criterion {n}: "analysis" must be a non-empty text comparing the two articles, '
                             f"got {analysis!r}")
        pair = []
        for side in ("article_1", "article_2"):
            value = answer.get(side)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or not 0 <= value <= MAX_SCORE:
                raise ParseError(f"criterion {n}: {side} must be a number from 0 to 10, got {value!r}")
            pair.append(float(value))
        out.append(CriterionGrade(analysis.strip(), pair[0], pair[1]))
    return out


def race_scores(graded: Sequence[dict]) -> dict[str, Any]:
    """S_d and S_int for both articles, and the ratios, from the stored per-criterion grades (each with
    dimension, dimension_weight, weight, article_1, article_2). A ratio with a zero denominator is None."""
    dims: dict[str, dict[str, float]] = {}
    for g in graded:
        d = dims.setdefault(g["dimension"], {"W": g["dimension_weight"], "target": 0.0, "reference": 0.0})
        d["target"] += g["weight"] * g["article_1"]
        d["reference"] += g["weight"] * g["article_2"]
    s_int_target = sum(d["W"] * d["target"] for d in dims.values())
    s_int_reference = sum(d["W"] * d["reference"] for d in dims.values())

    def ratio(a: float, b: float) -> float | None:
        return a / (a + b) if a + b > 0 else None

    return {"overall": ratio(s_int_target, s_int_reference), "s_int_target": s_int_target,
            "s_int_reference": s_int_reference,
            "dimensions": {name: {"ratio": ratio(d["target"], d["reference"]), "weight": d["W"],
                                  "s_target": d["target"], "s_reference": d["reference"]}
                           for name, d in dims.items()}}


class RaceMetric(LLMJudgedMetric):
    """One RACE figure: `race_dimension` None for race_overall, else one of the four dimensions."""

    dimension = "reference_relative_quality"
    headline = "score"
    variants = ("score",)
    prompt_name = "race_scoring_v2"  # v1 (scores without analysis) stays for the provenance of older scores
    definition = "d1"  # the formula is unchanged; the metric version moves with the prompt (d1+race_scoring_v2)
    calls_per_report = 1.0  # one call per report, shared by the five RACE metrics (cache)
    race_dimension: str | None = None

    @property
    def purpose(self) -> str:
        return "metric.race"  # one question for the five metrics: one purpose in the audit trail

    def items(self, report: ReportContext) -> list[Item]:
        if report.is_human_exemplar or not rubric_of(report.query):
            return []
        return [Item(ITEM_KEY, tuple(_criteria(report)))]

    # Judge validation: one unit per criterion the metric counts (race_overall: all of them; a dimension's
    # metric: that dimension's), sub_key its 1-based place in the rubric. The judge scores each article
    # 0-10; a human answers the comparison instead (which article is better on this criterion), and the
    # judge's scores map onto it by comparison_label: within TIE_MARGIN points "about_equal", else the
    # article scored higher is better. That is what the ratio the metric reports rewards.
    annotation_question = ("On the criterion below, which text is better: the generated report or the "
                           "human-written related-work section? Answer about_equal when neither is clearly better.")
    annotation_labels = (REPORT_BETTER, ABOUT_EQUAL, HUMAN_BETTER)

    def annotation_units(self, report: ReportContext, item: Item, label: Any) -> list[AnnotationUnit]:
        graded = label if isinstance(label, list) and len(label) == len(item.payload) else None
        target, human = article_text(report.text), reference_text(report.query.exemplar_text)
        units = []
        for n, c in enumerate(item.payload, 1):
            if self.race_dimension is not None and c["dimension"] != self.race_dimension:
                continue
            judged = None
            if graded is not None and isinstance(graded[n - 1], dict):
                a, b = graded[n - 1].get("article_1"), graded[n - 1].get("article_2")
                if isinstance(a, int | float) and isinstance(b, int | float):
                    judged = comparison_label(float(a), float(b))
            units.append(AnnotationUnit(str(n), {
                "dimension": c["dimension"].replace("_", " "), "criterion": c["criterion"],
                "criterion_explanation": c["explanation"], "report": target, "human_section": human}, judged))
        return units

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if report.is_human_exemplar:
            return [Score("score", HUMAN_SCORE, details={"by_construction": "the human section is the reference"})]
        if not rubric_of(report.query):
            return [Score("score", None, f"no RACE rubric for query {report.arxiv_id} in release {report.release_id}: "
                          f"run `deepscholar release enrich {report.release_id} --tracks race`")]
        return None

    def prompt_fields(self, report: ReportContext, item: Item) -> dict[str, Any]:
        listed = "\n".join(f"{n}. [{c['dimension']}] {c['criterion']}: {c['explanation']}"
                           for n, c in enumerate(item.payload, 1))
        return {"title": report.query.title, "abstract": report.query.abstract,
                "article_1": article_text(report.text), "article_2": reference_text(report.query.exemplar_text),
                "criteria": listed, "count": len(item.payload)}

    def parse(self, text: str, item: Item) -> list[CriterionGrade]:
        return parse_criterion_scores(text, len(item.payload))

    def answer_budget(self, item: Item) -> int:
        # Two to four sentences of analysis and two scores per criterion: about 60-120 tokens each.
        return answer_shapes.per_item_budget(len(item.payload), CRITERION_ANSWER_TOKENS)

    def answer_schema(self, item: Item) -> dict:
        score = {"type": "number", "minimum": 0, "maximum": MAX_SCORE}
        return answer_shapes.array_of(answer_shapes.object_schema(
            {"analysis": answer_shapes.TEXT, "article_1": score, "article_2": score}), len(item.payload))

    def label_of(self, item: Item, answer: list[CriterionGrade]) -> tuple[list[dict], str]:
        # The analysis is stored with each criterion's scores, so the drill-down shows why.
        graded = [{**c, "analysis": g.analysis, "article_1": g.article_1, "article_2": g.article_2}
                  for c, g in zip(item.payload, answer, strict=True)]
        return graded, ("per criterion the judge's comparative analysis, then its scores; article_1 = the report "
                        "(target), article_2 = the human section (reference)")

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm import local_judge

        out = []
        for item in items:
            target = [strip_citation_numbers(s.text) for s in report.sentences] or [""]
            reference = [strip_citation_markers(s) for s in split_exemplar_sentences(report.query.exemplar_text)] or [""]
            asked = [f"{c['criterion']}: {c['explanation']}" for c in item.payload]
            grades = []
            for article in (target, reference):
                sims = local_judge.similarity(asked, article)
                grades.append([round(MAX_SCORE * min(max(float(row.max()), 0.0), 1.0), 2) for row in sims])
            graded = [{**c, "article_1": a, "article_2": b}
                      for c, a, b in zip(item.payload, grades[0], grades[1], strict=True)]
            out.append(ItemJudgment(item.key, graded, explanation=(
                "local embedding judge, not an LLM: each criterion scored 10 x the best cosine between the "
                "criterion and the article's sentences; article_1 = the report, article_2 = the human section")))
        return out

    def score_judged(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        (judgment,) = judgments
        scores = race_scores(judgment.label)
        if self.race_dimension is None:
            value = scores["overall"]
        else:
            value = scores["dimensions"].get(self.race_dimension, {}).get("ratio")
        details = {"target": "article_1", "s_int_target": scores["s_int_target"],
                   "s_int_reference": scores["s_int_reference"],
                   "dimensions": scores["dimensions"], "n_criteria": len(judgment.label)}
        if value is None:
            return [Score("score", None, "both articles scored 0 on every criterion counted: the ratio is undefined",
                          n_items=1, details=details)]
        return [Score("score", value, n_items=1, details=details)]
