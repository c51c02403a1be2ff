"""Cited statement match (ReportBench track, Faithfulness): is each cited statement grounded in its source?

Definition: docs/METRICS.md, "`cited_statement_match`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.reportbench.cited_statement_match`.
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
from deepscholar.evaluation.metrics.core.citation_precision import resolved_text
from deepscholar.evaluation.metrics.fact.base import states_something
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import ParseError, parse_json_object
from deepscholar.text.citations import strip_citation_numbers
from deepscholar.text.sentences import split_report_sentences

__all__ = ["CitedStatementMatch", "METRIC", "NOT_FOUND", "MATCH_COSINE", "parse_match", "quote_in_source"]

NAME = "cited_statement_match"
NOT_FOUND = "NOT_FOUND"
# Local judge: the source sentence (or whole text) closest to the statement is the "quote", and the pair
# matches when their cosine reaches this (claim coverage's bar for full support).
MATCH_COSINE = 0.65


def parse_match(text: str) -> tuple[str | None, bool, str]:
    """(quote or None for NOT_FOUND, match, reason) from the judge's JSON object, strictly."""
    obj = parse_json_object(text)
    quote, match, reason = obj.get("quote"), obj.get("match"), obj.get("reason")
    if not isinstance(quote, str) or not quote.strip():
        raise ParseError(f'"quote" must be a non-empty string: a passage of the source, or {NOT_FOUND}')
    if not isinstance(match, bool):
        raise ParseError('"match" must be the JSON literal true or false')
    if not isinstance(reason, str) or not reason.strip():
        raise ParseError('"reason" must be a non-empty string')
    found = quote.strip() != NOT_FOUND
    if not found and match:
        raise ParseError(f'"match" must be false when the quote is {NOT_FOUND}')
    return (quote.strip() if found else None), match, reason.strip()


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def quote_in_source(quote: str, source: str) -> bool:
    """Does the quote appear in the source word for word, white space and case aside."""
    return _folded(quote) in _folded(source)


class CitedStatementMatch(LLMJudgedMetric):
    name = NAME
    dimension = "faithfulness"
    position = 1  # column within the dimension
    label = "Stmt match"
    headline = "score"
    variants = ("score",)
    # One call per pair whose source has text: citation precision's pairs, 9.2 per report on the demo month.
    calls_per_report = 9.0  # balances judge tasks only (evaluation.jobs)

    prompt_name = "cited_statement_match_v1"
    # d1: pairs read off the [n] markers; a source without text is no match, without a call.
    # d2: one pair per (sentence, paper): two numbers naming one paper in one sentence are one pair.
    # d3: the resolver reads ids in any written case and LaTeX accents in titles as their letters.
    definition = "d3"

    # Judge validation: one unit per pair whose source has text (one without is no match, unasked: no unit).
    # The human answers the judge's final decision; the quote it gave is not shown (it would hint at it).
    annotation_question = ("Does a passage of the cited source say what the statement says (in any wording)? "
                           "Answer no_match when no passage supports it or it only touches the same topic.")
    annotation_labels = ("match", "no_match")

    def annotation_units(self, report: ReportContext, item: Item, label: dict | None) -> list[AnnotationUnit]:
        statement, _, source = item.payload
        if source is None:
            return []
        match = label.get("match") if isinstance(label, dict) else None
        judged = None if not isinstance(match, bool) else ("match" if match else "no_match")
        return [AnnotationUnit("", {"statement": statement, "source": source}, judged)]

    def items(self, report: ReportContext) -> list[Item]:
        """payload = (the statement: the sentence without markers, cited number, the source's text or None)."""
        out = []
        for sentence in report.sentences:
            statement = " ".join(strip_citation_numbers(sentence.text).split())
            if not states_something(statement):
                continue
            out += [Item(f"s{sentence.index}:c{n}", (statement, n, resolved_text(report, n)))
                    for n in dict.fromkeys(report.paper_number(c) for c in sentence.citations)]
        return out

    def prompt_fields(self, report: ReportContext, item: Item) -> dict | ItemJudgment:
        statement, _, source = item.payload
        if source is None:
            return _no_text(report, item)
        return {"statement": statement, "source": source}

    def parse(self, text: str, item: Item) -> tuple[str | None, bool, str]:
        return parse_match(text)

    answer_tokens = answer_shapes.QUOTE_BUDGET  # the quote is a passage of the source

    def answer_schema(self, item: Item) -> dict:
        return answer_shapes.object_schema({"quote": answer_shapes.TEXT, "match": {"type": "boolean"},
                                            "reason": answer_shapes.TEXT})

    def label_of(self, item: Item, answer: tuple[str | None, bool, str]) -> tuple[dict, str]:
        quote, match, reason = answer
        verbatim = None if quote is None else quote_in_source(quote, item.payload[2])
        return {"match": match, "quote": quote, "quote_in_source": verbatim}, reason

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm import local_judge

        items = list(items)
        sources = {n: t for _, n, t in (it.payload for it in items) if t is not None}
        # Each source's candidate quotes: its sentences, and its whole text (a snippet may be one line).
        pieces = {n: list(dict.fromkeys([*(s.text for s in split_report_sentences(t)), t])) for n, t in sources.items()}
        statements = list(dict.fromkeys(it.payload[0] for it in items if it.payload[1] in sources))
        if not statements:  # no cited source has text
            return [_no_text(report, item) for item in items]
        flat = list(dict.fromkeys(p for ps in pieces.values() for p in ps))
        sims = local_judge.similarity(statements, flat)
        row_of = {s: i for i, s in enumerate(statements)}
        col_of = {p: j for j, p in enumerate(flat)}
        out = []
        for item in items:
            statement, number, source = item.payload
            if source is None:
                out.append(_no_text(report, item))
                continue
            scored = [(round(float(sims[row_of[statement], col_of[p]]), 4), p) for p in pieces[number]]
            cosine, best = max(scored, key=lambda x: x[0])  # the first of equal ones: deterministic
            match = cosine >= MATCH_COSINE
            label = {"match": match, "quote": best if match else None,
                     "quote_in_source": quote_in_source(best, source) if match else None}
            out.append(ItemJudgment(item.key, label, explanation=(
                f"local embedding judge ({local_judge.MODEL_ID}), not an LLM: the source [{number}] passage "
                f"closest to the statement (one of its sentences or its whole text) has cosine {cosine:.3f}, "
                f"{'>=' if match else '<'} {MATCH_COSINE}: {'quoted' if match else NOT_FOUND}")))
        return out

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if self.items(report):
            return None
        return [Score(v, 0.0, details={"no_citation_pairs": True, "n_pairs": 0}) for v in self.variants]

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        return judgments_in_order(self.items(report), judgments, "no judgment for this pair")

    def score_judged(self, report: ReportContext, ordered: Sequence[ItemJudgment]) -> list[Score]:
        labels = [_label(j) for j in ordered]
        n = len(labels)
        matched = sum(label["match"] for label in labels)
        details = {
            "n_pairs": n,
            "n_match": matched,
            "n_not_found": sum(label["quote"] is None for label in labels),
            "n_no_text": sum(it.payload[2] is None for it in self.items(report)),
            "n_match_quote_not_in_source": sum(label["match"] and label.get("quote_in_source") is False
                                               for label in labels),
        }
        return [Score("score", matched / n, n_items=n, details=details)]


def _no_text(report: ReportContext, item: Item) -> ItemJudgment:
    number = item.payload[1]
    why = "names no stored source" if number not in report.sources else "has no text (no snippet, title or abstract)"
    return ItemJudgment(item.key, {"match": False, "quote": None, "quote_in_source": None}, explanation=(
        f"[{number}] {why}: nothing to ground the statement in, so no match, without a judge call"))


def _label(judgment: ItemJudgment) -> dict:
    label = judgment.label
    if not (isinstance(label, dict) and isinstance(label.get("match"), bool)
            and (label.get("quote") is None or isinstance(label["quote"], str))):
        raise ValueError(f"{NAME}: label of {judgment.key} must be {{'match': bool, 'quote': str or None, ...}}, "
                         f"got {label!r}")
    return label


METRIC = CitedStatementMatch()
