"""Claim coverage (METRICS.md, Verifiability): is each sentence backed by the references around it?

Definition: docs/METRICS.md, "`claim_coverage`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.core.claim_coverage`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deepscholar.evaluation.metrics.base import (
    AnnotationUnit,
    Item,
    ItemJudgment,
    LLMJudgedMetric,
    ReportContext,
    Score,
    judgments_in_order,
    unscored_item,
)
from deepscholar.evaluation.metrics.core.citation_precision import (
    SUPPORT_SCHEMA,
    parse_support,
    resolved_text,
    support_cosines,
)
from deepscholar.settings import current_settings
from deepscholar.text.citations import strip_citation_numbers

__all__ = ["ClaimCoverage", "METRIC", "DEFAULT_W_MAX", "SWEEP_W_MAX", "SUPPORT_COSINE", "query_text",
           "references_at", "coverage_at", "configured_w_max"]

NAME = "claim_coverage"
DEFAULT_W_MAX = 1  # the headline's window: the monthly run asks nothing it does not need
SWEEP_W_MAX = 5  # METRICS.md's w = 0..5 sweep, opt-in
# Local judge: a sentence is covered when its best cosine against a reference (whole text or one of its
# sentences) reaches this; stricter than citation precision's, since *every* claim must be backed.
SUPPORT_COSINE = 0.65


def query_text(report: ReportContext) -> str:
    """The implicit reference: the query paper's title and abstract."""
    return ". ".join(x.strip() for x in (report.query.title, report.query.abstract) if x and x.strip())


def references_at(report: ReportContext, pos: int, window: int) -> tuple[str, ...]:
    """Reference texts for the sentence at `pos` and window `window`: the query paper first, then the
    resolved sources cited in the window by number, each distinct text once."""
    lo, hi = max(0, pos - window), min(len(report.sentences), pos + window + 1)
    numbers = sorted({n for s in report.sentences[lo:hi] for n in s.citations})
    texts = [t for t in [query_text(report)] if t]
    for n in numbers:
        text = resolved_text(report, n)
        if text is not None and text not in texts:
            texts.append(text)
    return tuple(texts)


def coverage_at(minima: Sequence[int | None], window: int) -> float:
    """Share of sentences covered at `window`: minimal window known and no larger than it."""
    return sum(m is not None and m <= window for m in minima) / len(minima)


class ClaimCoverage(LLMJudgedMetric):
    name = NAME
    dimension = "verifiability"
    position = 2  # column within the dimension
    label = "Claim cov (w=1)"  # the leaderboard's column heading (Table 2)
    headline = "w1"
    calls_per_report = 12.0  # balances judge tasks only (evaluation.jobs)
    prompt_name = "claim_coverage_v2"
    paper_human_agreement = 0.80  # the DeepScholar paper's judge-human agreement

    # Judge validation: one unit per sentence, asked at the headline's window (w = 1): the references are
    # the query paper and the sources cited in the sentence or next to it. The judge's stored minimal
    # window reads as covered when it is at most 1 (a sentence not covered up to W_max is not covered).
    ANNOTATION_WINDOW = 1
    annotation_question = ("Do the references listed, taken together, support every claim of the sentence "
                           "(each method, finding, number, comparison and attribution)?")
    annotation_labels = ("covered", "not_covered")

    def annotation_units(self, report: ReportContext, item: Item, label: dict | None) -> list[AnnotationUnit]:
        pos = item.payload
        window = label.get("min_window", "missing") if isinstance(label, dict) else "missing"
        judged = None
        if window is None or (isinstance(window, int) and not isinstance(window, bool)):
            judged = "covered" if window is not None and window <= self.ANNOTATION_WINDOW else "not_covered"
        refs = references_at(report, pos, self.ANNOTATION_WINDOW)
        return [AnnotationUnit("", {"sentence": strip_citation_numbers(report.sentences[pos].text),
                                    "references": _listed(refs, query_text(report))}, judged)]

    def __init__(self, w_max: int = DEFAULT_W_MAX) -> None:
        if w_max < 1:
            raise ValueError("w_max must be at least 1 (the headline is coverage at w=1)")
        self.w_max = w_max
        self.variants = tuple(f"w{w}" for w in range(w_max + 1))
        # W_max is part of the definition: a minimum of null means "not covered up to W_max".
        # d2: report sentences as split into table rows and list items.
        self.definition = f"d2.wmax{w_max}"
        super().__init__()

    def items(self, report: ReportContext) -> list[Item]:
        """payload = the sentence's position in report.sentences."""
        return [Item(f"s{sentence.index}", pos) for pos, sentence in enumerate(report.sentences)]

    def _search(self, report: ReportContext, key: str, pos: int,
                covered: Callable[[int, tuple[str, ...]], tuple[bool | None, str, int]]) -> ItemJudgment:
        """The early-exit loop shared by both judges; `covered` answers (supported or None, note, calls)."""
        asked: list[int] = []
        notes: list[str] = []
        calls = 0
        previous: frozenset[str] | None = None
        for window in range(self.w_max + 1):
            refs = references_at(report, pos, window)
            if frozenset(refs) == previous:
                continue  # no new source: the same question, hence the same (negative) answer
            previous = frozenset(refs)
            supported, note, n_calls = covered(window, refs)
            calls += n_calls
            asked.append(window)
            if supported is None:
                return unscored_item(key, f"window {window}: {note}", calls)
            notes.append(f"w{window} ({len(refs)} references): {'covered' if supported else 'not covered'}: {note}")
            if supported:
                return ItemJudgment(key, {"min_window": window, "asked": asked}, explanation="; ".join(notes),
                                    calls=calls)
        notes.append(f"not covered at any window up to {self.w_max}")
        return ItemJudgment(key, {"min_window": None, "asked": asked}, explanation="; ".join(notes), calls=calls)

    def judge_llm(self, client, report: ReportContext, item: Item) -> ItemJudgment:
        pos = item.payload
        sentence = strip_citation_numbers(report.sentences[pos].text)
        query = query_text(report)

        def ask(window: int, refs: tuple[str, ...]) -> tuple[bool | None, str, int]:
            judged = self.ask(client, item, references=_listed(refs, query), sentence=sentence)
            if not judged.scored:
                return None, judged.unscored_reason or "unscored", judged.calls
            supported, explanation = judged.value
            return supported, explanation, judged.calls

        return self._search(report, item.key, pos, ask)

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        from deepscholar.llm.local_judge import MODEL_ID

        items = list(items)
        claims = [strip_citation_numbers(report.sentences[it.payload].text) for it in items]
        texts = list(dict.fromkeys(t for it in items for t in references_at(report, it.payload, self.w_max)))
        cosines = support_cosines(claims, texts)
        col_of = {t: j for j, t in enumerate(texts)}
        out = []
        for item, row in zip(items, cosines, strict=True):
            def covered(window: int, refs: tuple[str, ...], row=row) -> tuple[bool, str, int]:
                best = max((row[col_of[t]] for t in refs), default=0.0)
                ok = best >= SUPPORT_COSINE
                return ok, f"best cosine {best:.3f} {'>=' if ok else '<'} {SUPPORT_COSINE}", 0

            judged = self._search(report, item.key, item.payload, covered)
            out.append(ItemJudgment(judged.key, judged.label, judged.unscored_reason, explanation=(
                f"local embedding judge ({MODEL_ID}), not an LLM: the sentence (markers removed) against the "
                f"references (whole texts and their sentences): {judged.explanation}")))
        return out

    def parse(self, text: str, item: Item) -> tuple[bool, str]:
        return parse_support(text)

    def answer_schema(self, item: Item) -> dict:
        return SUPPORT_SCHEMA

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if self.items(report):
            return None
        return [Score(v, 0.0, details={"n_sentences": 0, "note": "the report has no sentences"})
                for v in self.variants]

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        return judgments_in_order(self.items(report), judgments, "no judgment for this sentence")

    def score_judged(self, report: ReportContext, ordered: Sequence[ItemJudgment]) -> list[Score]:
        items = self.items(report)
        minima = [self._minimum(j) for j in ordered]
        counts = {str(w): minima.count(w) for w in range(self.w_max + 1)}
        counts["none"] = minima.count(None)
        details = {"n_sentences": len(minima), "w_max": self.w_max, "min_window_counts": counts}
        return [Score(f"w{w}", coverage_at(minima, w), n_items=len(items),
                      details={**details, "n_covered": sum(m is not None and m <= w for m in minima)})
                for w in range(self.w_max + 1)]

    def _minimum(self, judgment: ItemJudgment) -> int | None:
        label = judgment.label
        value = label.get("min_window") if isinstance(label, dict) else "missing"
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= self.w_max:
            raise ValueError(f"{NAME}: min_window of {judgment.key} must be null or 0..{self.w_max}, "
                             f"got {value!r}")
        return value


def _listed(refs: Sequence[str], query: str) -> str:
    """References numbered by position only (not by the report's [n]), so identical sets read identically."""
    return "\n\n".join(f"Reference {i}{' (the query paper)' if text == query else ''}:\n{text}"
                         for i, text in enumerate(refs, 1))


def configured_w_max() -> int:
    """DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX (1..5), else the monthly default of 1; a bad value is logged
    (deepscholar.settings)."""
    return current_settings().claim_coverage_w_max


METRIC = ClaimCoverage(configured_w_max())
