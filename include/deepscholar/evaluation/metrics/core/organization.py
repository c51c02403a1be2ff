"""Organization (METRICS.md, Knowledge synthesis): pairwise against the exemplar, judged in both orders.

Judging twice with the report first and then second cancels a judge's preference for a position: a
report that only wins from one place scores 0.5, like a tie. Both sections are shown in the same shape
(numbered [n] markers, no reference list) so that formatting cannot decide.

Definition: docs/METRICS.md, "`organization`".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from deepscholar.evaluation.metrics.base import (
    AnnotationUnit,
    Item,
    ItemJudgment,
    LLMJudgedMetric,
    ReportContext,
    Score,
)
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import ParseError, parse_json_object
from deepscholar.text.citations import strip_citation_numbers

__all__ = ["Organization", "METRIC", "ORDERS", "render_exemplar", "report_body", "parse_decision",
           "coherence", "Coherence", "COHESION_WEIGHT", "SEPARATION_WEIGHT", "DUPLICATE_WEIGHT",
           "DUPLICATE_COSINE"]

NAME = "organization"
# item key -> where the report is shown
ORDERS: dict[str, str] = {"order:report_first": "A", "order:report_second": "B"}
# Local judge: coherence = cohesion within paragraphs + separation between them - near-duplicate share.
COHESION_WEIGHT = 0.5
SEPARATION_WEIGHT = 0.5
DUPLICATE_WEIGHT = 1.0
DUPLICATE_COSINE = 0.9


@functools.lru_cache(maxsize=1024)  # one exemplar per query, asked about by every report of it
def render_exemplar(text: str) -> str:
    """The exemplar with its [@key] markers as [n], numbered by first appearance, like a report's."""
    from deepscholar.text.markers import cited_keys, markers_to_numbers

    number_of = {key: n for n, key in enumerate(cited_keys(text or ""), 1)}
    return markers_to_numbers(text or "", number_of)[0].strip()


@functools.lru_cache(maxsize=256)  # each report is asked about twice (both orders)
def report_body(text: str) -> str:
    """The report without its reference list: the exemplar has none, and formatting must not decide."""
    # The same rule split_report_sentences uses to keep reference lists out of the sentences.
    from deepscholar.text.citations import reference_spans as _reference_spans

    lines = (text or "").splitlines()
    drop = {i for a, b in _reference_spans(lines) for i in range(a, b)}
    return "\n".join(line for i, line in enumerate(lines) if i not in drop).strip()


def parse_decision(text: str) -> tuple[str, str]:
    obj = parse_json_object(text)
    decision, explanation = obj.get("decision"), obj.get("explanation")
    if not isinstance(decision, str) or decision.strip().upper() not in ("A", "B"):
        raise ParseError('"decision" must be "A" or "B" (no ties)')
    if not isinstance(explanation, str) or not explanation.strip():
        raise ParseError('"explanation" must be a non-empty string')
    return decision.strip().upper(), explanation.strip()


def _winner(decision: str, report_at: str) -> str:
    return "report" if decision == report_at else "exemplar"


class Organization(LLMJudgedMetric):
    name = NAME
    dimension = "knowledge_synthesis"
    position = 1  # column within the dimension
    label = "Org"  # the leaderboard's column heading (Table 2)
    headline = "score"
    calls_per_report = 2.0  # balances judge tasks only (evaluation.jobs)
    variants = ("score",)

    prompt_name = "organization_v2"
    definition = "d2"  # d2: the local judge reads report sentences as split into table rows and list items
    paper_human_agreement = 0.78  # the DeepScholar paper's judge-human agreement

    # Judge validation: one unit per order, the two sections shown exactly as the judge saw them (the
    # report as A, then as B), so a human's position preference shows as the judge's would.
    annotation_question = ("Which related-work section is better organised and more coherent (clear themes in a "
                           "logical order, focused paragraphs, no repetition)? Ignore how many works each covers "
                           "and its formatting. No ties: answer A or B.")
    annotation_labels = ("A", "B")

    def annotation_units(self, report: ReportContext, item: Item, label: dict | None) -> list[AnnotationUnit]:
        fields = self.prompt_fields(report, item)
        decision = label.get("decision") if isinstance(label, dict) else None
        return [AnnotationUnit("", {"section_a": fields["section_a"], "section_b": fields["section_b"]},
                               decision if decision in self.annotation_labels else None)]

    def items(self, report: ReportContext) -> list[Item]:
        if report.is_human_exemplar:
            return []  # against itself: 0.5 by construction
        return [Item(key, report_at) for key, report_at in ORDERS.items()]

    def prompt_fields(self, report: ReportContext, item: Item) -> dict:
        ours, theirs = report_body(report.text), render_exemplar(report.query.exemplar_text)
        a, b = (ours, theirs) if item.payload == "A" else (theirs, ours)
        return {"title": report.query.title, "abstract": report.query.abstract, "section_a": a, "section_b": b}

    def parse(self, text: str, item: Item) -> tuple[str, str]:
        return parse_decision(text)

    def answer_schema(self, item: Item) -> dict:
        return answer_shapes.object_schema({"decision": {"type": "string", "enum": ["A", "B"]},
                                            "explanation": answer_shapes.TEXT})

    def label_of(self, item: Item, answer: tuple[str, str]) -> tuple[dict, str]:
        decision, explanation = answer
        return {"decision": decision, "winner": _winner(decision, item.payload)}, explanation

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm.local_judge import MODEL_ID

        items = list(items)
        if not items:
            return []
        # Position-free: each section gets one score, so the report wins both orders or loses both
        # (an exact tie goes to A in each order, which splits them: 0.5).
        ours = coherence(report_body(report.text))
        theirs = coherence(render_exemplar(report.query.exemplar_text))
        out = []
        for item in items:
            report_at = item.payload
            a, b = (ours, theirs) if report_at == "A" else (theirs, ours)
            decision = "A" if a.score >= b.score else "B"
            out.append(ItemJudgment(item.key, {"decision": decision, "winner": _winner(decision, report_at)},
                                    explanation=(
                f"local embedding judge ({MODEL_ID}), not an LLM: coherence A {a.describe()} vs "
                f"B {b.describe()}; the higher wins, a tie goes to A")))
        return out

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        return [Score("score", 0.5, details={"by_construction": True})] if report.is_human_exemplar else None

    def score_judged(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        winner = {j.key: j.label["winner"] for j in judgments}
        missing = [k for k in ORDERS if k not in winner]
        if missing:
            return [Score("score", None, f"no judgment for {', '.join(missing)}", n_items=len(judgments))]
        wins = sum(winner[k] == "report" for k in ORDERS)
        return [Score("score", wins / len(ORDERS), n_items=len(judgments),
                      details={k.removeprefix("order:"): winner[k] for k in ORDERS})]


# --- the local judge's coherence ---------------------------------------------------------------------

@dataclass(frozen=True)
class Coherence:
    cohesion: float
    separation: float
    duplicates: float
    n_paragraphs: int
    n_sentences: int

    @property
    def score(self) -> float:
        # Rounded so float noise cannot turn a tie into a win.
        return round(COHESION_WEIGHT * self.cohesion + SEPARATION_WEIGHT * self.separation
                     - DUPLICATE_WEIGHT * self.duplicates, 4)

    def describe(self) -> str:
        return (f"{self.score:.4f} (adjacent-sentence cohesion {self.cohesion:.3f}, paragraph separation "
                f"{self.separation:.3f}, near-duplicate share {self.duplicates:.3f}; {self.n_paragraphs} "
                f"paragraphs, {self.n_sentences} sentences)")


def _paragraph_sentences(text: str) -> list[list[str]]:
    """Body sentences grouped by paragraph (blank-line blocks); headings and reference lists left out."""
    from deepscholar.text.sentences import split_report_sentences

    body = {s.text for s in split_report_sentences(text)}
    paragraphs = []
    for block in re.split(r"\n\s*\n", text or ""):
        sentences = [strip_citation_numbers(s.text) for s in split_report_sentences(block) if s.text in body]
        sentences = [s for s in sentences if s]
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


def coherence(text: str) -> Coherence:
    """A section's coherence from sentence embeddings (METRICS.md organisation criteria, approximated).

    Cohesion: mean cosine of adjacent sentences inside a paragraph (sentences that flow). Separation:
    1 - mean cosine between paragraph centroids (each paragraph its own topic). Duplicates: share of
    sentences nearly repeating an earlier one (redundancy).
    """
    from deepscholar.llm import local_judge

    paragraphs = _paragraph_sentences(text)
    flat = [s for p in paragraphs for s in p]
    if not flat:
        return Coherence(0.0, 0.0, 0.0, 0, 0)
    import numpy as np  # here, not at the top: the registry imports every metric, and a board reader needs none

    vectors = local_judge.embed(flat)
    spans, start = [], 0
    for p in paragraphs:
        spans.append((start, start + len(p)))
        start += len(p)
    adjacent = [float(vectors[i] @ vectors[i + 1]) for a, b in spans for i in range(a, b - 1)]
    cohesion = float(np.mean(adjacent)) if adjacent else 0.0
    if len(spans) > 1:
        centroids = np.stack([vectors[a:b].mean(axis=0) for a, b in spans])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        sims = centroids @ centroids.T
        upper = sims[np.triu_indices(len(spans), k=1)]
        separation = 1.0 - float(upper.mean())
    else:
        separation = 0.0
    sims = vectors @ vectors.T
    repeats = sum(1 for i in range(1, len(flat)) if float(sims[i, :i].max()) >= DUPLICATE_COSINE)
    return Coherence(cohesion, separation, repeats / len(flat), len(spans), len(flat))


METRIC = Organization()
