"""Citation precision (METRICS.md, Verifiability): does each cited source back what its sentence says?

Definition: docs/METRICS.md, "`citation_precision`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.core.citation_precision`.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import (
    AnnotationUnit,
    Item,
    ItemJudgment,
    LLMJudgedMetric,
    ReportContext,
    Score,
    judgments_in_order,
)
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import ParseError, parse_json_object
from deepscholar.text.citations import strip_citation_numbers
from deepscholar.text.sentences import split_report_sentences

__all__ = ["CitationPrecision", "METRIC", "SUPPORT_COSINE", "parse_support", "strip_citation_numbers",
           "resolved_text", "support_cosines"]

NAME = "citation_precision"
# Local judge: a pair is precise when the sentence's best cosine against the source (its whole text or
# one of its sentences) reaches this. "At least one claim" is a weaker test than claim coverage's.
SUPPORT_COSINE = 0.50


def parse_support(text: str) -> tuple[bool, str]:
    """{"supported": true|false, "explanation": "..."}, strictly (the verifiability prompts share it)."""
    obj = parse_json_object(text)
    supported, explanation = obj.get("supported"), obj.get("explanation")
    if not isinstance(supported, bool):
        raise ParseError('"supported" must be the JSON literal true or false')
    if not isinstance(explanation, str) or not explanation.strip():
        raise ParseError('"explanation" must be a non-empty string')
    return supported, explanation.strip()


SUPPORT_SCHEMA = answer_shapes.object_schema({"supported": {"type": "boolean"}, "explanation": answer_shapes.TEXT})


def resolved_text(report: ReportContext, number: int) -> str | None:
    """The text a judge can read for cited number `number`: its paper's first-cited source with text (one
    paper cited under two numbers is one source); None when it names no usable source."""
    for source in report.paper_sources(number):
        if (source.text or "").strip():
            return source.text.strip()
    return None


def support_cosines(claims: Sequence[str], texts: Sequence[str]) -> list[list[float]]:
    """[claim][text]: best cosine of the claim against the text as a whole or any of its sentences.

    Rounded to 4 decimals so float noise cannot flip a comparison with a threshold between runs.
    """
    from deepscholar.llm import local_judge

    pieces_of = [list(dict.fromkeys([t, *(s.text for s in split_report_sentences(t))])) for t in texts]
    pieces = list(dict.fromkeys(p for ps in pieces_of for p in ps))
    if not claims or not pieces:
        return [[0.0] * len(texts) for _ in claims]
    sims = local_judge.similarity(list(claims), pieces)
    col = {p: j for j, p in enumerate(pieces)}
    return [[round(float(max(sims[i, col[p]] for p in ps)), 4) for ps in pieces_of]
            for i in range(len(claims))]


class CitationPrecision(LLMJudgedMetric):
    name = NAME
    dimension = "verifiability"
    position = 1  # column within the dimension
    label = "Cite-P"  # the leaderboard's column heading (Table 2)
    headline = "per_pair"
    calls_per_report = 9.0  # balances judge tasks only (evaluation.jobs)
    variants = ("per_pair", "per_sentence")

    prompt_name = "citation_precision_v2"
    # d2: report sentences as split into table rows and list items; d3: one pair per (sentence, paper), a
    # paper cited under two numbers in one sentence being one citation (evaluation/metrics/papers.py).
    # d4: the resolver reads ids in any written case and LaTeX accents in titles as their letters.
    definition = "d4"
    paper_human_agreement = 0.80  # the DeepScholar paper's judge-human agreement

    # Judge validation: one unit per (sentence, cited number) pair whose source has text; a pair naming no
    # source text is imprecise by construction (no call) and gives no unit.
    annotation_question = ("Does the cited source support at least one claim the sentence makes? Topical "
                           "closeness alone is not support.")
    annotation_labels = ("supported", "not_supported")

    def annotation_units(self, report: ReportContext, item: Item, label: int | None) -> list[AnnotationUnit]:
        pos, number = item.payload
        source = resolved_text(report, number)
        if source is None:
            return []
        judged = None if label not in (0, 1) else self.annotation_labels[0 if label else 1]
        return [AnnotationUnit("", {"sentence": strip_citation_numbers(report.sentences[pos].text),
                                    "source": source}, judged)]

    def items(self, report: ReportContext) -> list[Item]:
        """payload = (position of the sentence in report.sentences, cited number); [n][n] is one pair, and so
        are [3][5] when both name one paper (keyed by its first-cited number)."""
        return [Item(f"s{sentence.index}:c{n}", (pos, n))
                for pos, sentence in enumerate(report.sentences)
                for n in dict.fromkeys(report.paper_number(c) for c in sentence.citations)]

    def prompt_fields(self, report: ReportContext, item: Item) -> dict | ItemJudgment:
        pos, number = item.payload
        source = resolved_text(report, number)
        if source is None:
            return _unresolved(item.key, number)
        return {"sentence": strip_citation_numbers(report.sentences[pos].text), "source": source}

    def parse(self, text: str, item: Item) -> tuple[bool, str]:
        return parse_support(text)

    def answer_schema(self, item: Item) -> dict:
        return SUPPORT_SCHEMA

    def label_of(self, item: Item, answer: tuple[bool, str]) -> tuple[int, str]:
        supported, explanation = answer
        return int(supported), explanation

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm.local_judge import MODEL_ID

        items = list(items)
        claims = list(dict.fromkeys(strip_citation_numbers(report.sentences[pos].text) for pos, _ in
                                    (it.payload for it in items)))
        texts = list(dict.fromkeys(t for _, n in (it.payload for it in items)
                                   if (t := resolved_text(report, n)) is not None))
        cosines = support_cosines(claims, texts)
        row_of = {c: i for i, c in enumerate(claims)}
        col_of = {t: j for j, t in enumerate(texts)}
        out = []
        for item in items:
            pos, number = item.payload
            source = resolved_text(report, number)
            if source is None:
                out.append(_unresolved(item.key, number))
                continue
            cosine = cosines[row_of[strip_citation_numbers(report.sentences[pos].text)]][col_of[source]]
            precise = cosine >= SUPPORT_COSINE
            out.append(ItemJudgment(item.key, int(precise), explanation=(
                f"local embedding judge ({MODEL_ID}), not an LLM: best cosine {cosine:.3f} between the sentence "
                f"(markers removed) and source [{number}] (whole text or one of its sentences) is "
                f"{'>=' if precise else '<'} {SUPPORT_COSINE}")))
        return out

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if self.items(report):
            return None
        # METRICS.md: a report with no citations scores 0 (a score, not a failure).
        return [Score(v, 0.0, details={"n_pairs": 0, "note": "the report cites nothing"}) for v in self.variants]

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        return judgments_in_order(self.items(report), judgments, "no judgment for this pair")

    def score_judged(self, report: ReportContext, ordered: Sequence[ItemJudgment]) -> list[Score]:
        items = self.items(report)
        labels = [_label(j) for j in ordered]
        per_sentence: dict[int, list[int]] = {}
        for item, label in zip(items, labels, strict=True):
            per_sentence.setdefault(item.payload[0], []).append(label)
        details = {
            "n_pairs": len(labels),
            "n_precise": sum(labels),
            "n_unresolved": sum(resolved_text(report, it.payload[1]) is None for it in items),
            "n_sentences_citing": len(per_sentence),
        }
        n = len(items)
        return [
            Score("per_pair", sum(labels) / n, n_items=n, details=details),
            Score("per_sentence", sum(sum(ls) / len(ls) for ls in per_sentence.values()) / len(per_sentence),
                  n_items=n, details=details),
        ]


def _unresolved(key: str, number: int) -> ItemJudgment:
    return ItemJudgment(key, 0, explanation=(
        f"[{number}] resolves to no source with text, so it cannot support the sentence: counted as "
        "imprecise without a judge call"))


def _label(judgment: ItemJudgment) -> int:
    label = judgment.label
    if label not in (0, 1):
        raise ValueError(f"{NAME}: label of {judgment.key} must be 0 or 1, got {label!r}")
    return int(label)


METRIC = CitationPrecision()
