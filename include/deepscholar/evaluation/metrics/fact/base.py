"""What the FACT track's two metrics share (citation_accuracy, effective_citations): the report's
statement–source pairs, one judge call per cited source, and the three labels.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.fact.base`.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import (
    BatchJudgedMetric,
    Item,
    ItemJudgment,
    ReportContext,
    Score,
    judgments_in_order,
)
from deepscholar.evaluation.metrics.core.citation_precision import resolved_text, support_cosines
from deepscholar.text.citations import strip_citation_numbers

__all__ = ["FactMetric", "pooled_over_tasks", "SUPPORTED", "UNSUPPORTED", "UNKNOWN", "LABELS", "SUPPORT_COSINE", "citation_pairs",
           "states_something"]

SUPPORTED, UNSUPPORTED, UNKNOWN = "supported", "unsupported", "unknown"
JUDGE_LABELS = (SUPPORTED, UNSUPPORTED)  # what the judge may answer
LABELS = (*JUDGE_LABELS, UNKNOWN)  # what a stored label may hold ("unknown" is decided, never asked)
# Local judge: a statement is supported when its best cosine against the source (its whole text or one of
# its sentences) reaches this; the bar claim coverage sets for full support, not citation precision's
# "at least one claim" (0.50).
SUPPORT_COSINE = 0.65


def states_something(text: str) -> bool:
    """Has the text a letter or a digit: a sentence of markers and punctuation alone states nothing."""
    return any(ch.isalnum() for ch in text)


def citation_pairs(report: ReportContext) -> dict[int, list[str]]:
    """{cited paper, as its first-cited number: the statements citing it}, papers in first-cited order,
    statements in report order with their markers removed, each distinct text once per paper. One paper
    cited as [3] and [5] is one source, as the authors' scorer groups statements by the cited URL."""
    pairs: dict[int, dict[str, None]] = {}
    for sentence in report.sentences:
        if not sentence.citations:
            continue
        statement = " ".join(strip_citation_numbers(sentence.text).split())
        if not states_something(statement):
            continue
        for number in sentence.citations:
            pairs.setdefault(report.paper_number(number), {})[statement] = None
    return {n: list(statements) for n, statements in pairs.items()}


def pooled_over_tasks(counts: Sequence[dict]) -> tuple[float | None, float | None]:
    """(citation accuracy, effective citations) the way DeepResearch Bench's released `utils/stat.py`
    aggregates a system's reports, for setting our board beside theirs: supported and unsupported pairs
    summed over the reports that cite anything (a report without citation pairs is left out, not 0),
    accuracy = Σ supported / Σ (supported + unsupported), effective = Σ supported / the reports counted.
    `counts` are the stored details of the reports' citation_accuracy scores (`tally`); (None, None) when
    no report cites anything. A report whose every pair is unknown counts among the citing reports, as in
    stat.py; one left unscored for a source the judge could not answer stores no tally and is left out
    whole, where stat.py skips only that source. Our board follows the paper's Eqs. 3-4 instead: the mean
    of per-report values with an uncited report at 0 (docs/METRICS.md, FACT conformance)."""
    cited = [c for c in counts if not c.get("no_citation_pairs") and c.get("n_pairs", 0) > 0]
    if not cited:
        return None, None
    supported = sum(c.get(SUPPORTED, 0) for c in cited)
    checked = supported + sum(c.get(UNSUPPORTED, 0) for c in cited)
    return (supported / checked if checked else None), supported / len(cited)


class FactMetric(BatchJudgedMetric):
    """A FACT metric: the items, prompt, parsing and judges the two share; a subclass gives its value."""

    dimension = "citations"
    headline = "score"
    variants = ("score",)
    prompt_name = "fact_support_v1"
    # d1: pairs read off the [n] markers (no extraction call), exact duplicates merged (no LLM dedup),
    # a source without text makes its statements "unknown" (left out, counted). d2: pairs keyed by the
    # cited paper, not the number (one paper cited as [3] and [5] is one source: evaluation/metrics/papers.py).
    # d3: the resolver reads ids in any written case and LaTeX accents in titles as their letters, so more
    # numbers can name one paper.
    definition = "d3"
    labels = JUDGE_LABELS
    sub_item = "statement"
    # One call per distinct cited number with text: 7.5 per report on the demo month (citation precision's
    # pairs: 9.2). The second FACT metric's calls are answered by the first's request (cached or in
    # flight) but are calls all the same, as the estimate counts them.
    calls_per_report = 7.5  # balances judge tasks only (evaluation.jobs)

    # Judge validation: one unit per statement of a cited source with text (BatchJudgedMetric); a source
    # without text is decided "unknown" without a call and gives no unit.
    annotation_question = ("Does the cited source support this statement? Answer supported when the source "
                           "states or directly backs what the statement says, unsupported otherwise.")
    annotation_labels = JUDGE_LABELS

    def items(self, report: ReportContext) -> list[Item]:
        """One batch per cited number: key c<n>, sub-items the statements citing [n], about = n."""
        return [self.batch(f"c{n}", statements, n) for n, statements in citation_pairs(report).items()]

    def batch_fields(self, report: ReportContext, item: Item) -> dict | ItemJudgment:
        number = item.payload.about
        source = resolved_text(report, number)
        if source is None:
            return self._unknown(report, item)
        return {"source": source}

    def _unknown(self, report: ReportContext, item: Item) -> ItemJudgment:
        number = item.payload.about
        why = "names no stored source" if number not in report.sources else "has no text (no snippet, title or abstract)"
        return self.decided(item, UNKNOWN, (
            f"[{number}] {why}: its statements cannot be checked, so they are unknown, left out of the "
            "accuracy's denominator, without a judge call"))

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm.local_judge import MODEL_ID

        items = list(items)
        texts = {it.key: resolved_text(report, it.payload.about) for it in items}
        statements = list(dict.fromkeys(s for it in items if texts[it.key] is not None for s in it.payload.texts))
        sources = list(dict.fromkeys(t for t in texts.values() if t is not None))
        cosines = support_cosines(statements, sources)
        row_of = {s: i for i, s in enumerate(statements)}
        col_of = {t: j for j, t in enumerate(sources)}
        out = []
        for item in items:
            source = texts[item.key]
            if source is None:
                out.append(self._unknown(report, item))
                continue
            best = [cosines[row_of[s]][col_of[source]] for s in item.payload.texts]
            labels = [SUPPORTED if c >= SUPPORT_COSINE else UNSUPPORTED for c in best]
            shown = ", ".join(f"#{n} {c:.3f}" for n, c in enumerate(best, 1))
            out.append(ItemJudgment(item.key, self._labelled(item, labels), explanation=(
                f"local embedding judge ({MODEL_ID}), not an LLM: each statement's best cosine against "
                f"source [{item.payload.about}] (whole text or one of its sentences), supported at >= "
                f"{SUPPORT_COSINE}: {shown}")))
        return out

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if self.items(report):
            return None
        # As FACT: a report without citation pairs scores 0 (a score, not a failure), marked.
        details = {"no_citation_pairs": True, "n_pairs": 0, SUPPORTED: 0, UNSUPPORTED: 0, UNKNOWN: 0}
        return [Score(v, 0.0, details=details) for v in self.variants]

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        return judgments_in_order(self.items(report), judgments, "no judgment for this source")

    def tally(self, judgments: Sequence[ItemJudgment]) -> dict:
        """The pair counts by label, and how many sources were checked or unknown."""
        labels = [[label for _, label in self.sub_labels(j, LABELS)] for j in judgments]
        flat = [label for ls in labels for label in ls]
        return {"n_pairs": len(flat), **{x: flat.count(x) for x in LABELS}, "n_sources": len(judgments),
                "n_unknown_sources": sum(bool(ls) and all(x == UNKNOWN for x in ls) for ls in labels)}

    def value(self, counts: dict) -> float:
        raise NotImplementedError

    def score_judged(self, report: ReportContext, ordered: Sequence[ItemJudgment]) -> list[Score]:
        counts = self.tally(ordered)
        n = len(ordered)
        if counts[SUPPORTED] + counts[UNSUPPORTED] == 0:
            # Every cited source lacks text: nothing could be checked, for a reason that is the data's, not
            # necessarily the report's. Neither 0 nor 1 would be a measurement.
            reason = (f"none of the {counts['n_pairs']} citation pairs could be checked: every cited source "
                      "has no text (all unknown)")
            return [Score(v, None, reason, n_items=n, details=counts) for v in self.variants]
        return [Score(self.headline, self.value(counts), n_items=n, details=counts)]
