"""What every metric shares: the report it judges, the items it asks about, and what it stores.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.base`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from deepscholar.evaluation.metrics.papers import Paper, resolve_papers
from deepscholar.llm import answer_shapes
from deepscholar.text.sentences import Sentence

if TYPE_CHECKING:
    from deepscholar.llm.client import LLMClient
    from deepscholar.prompts import Prompt

__all__ = [
    "QueryInfo",
    "ExemplarReference",
    "NuggetInfo",
    "SourceDoc",
    "ReportContext",
    "Item",
    "ItemJudgment",
    "Score",
    "Metric",
    "unscored_item",
    "report_unscored",
    "judgments_in_order",
    "compose_version",
    "JudgeFreeMetric",
    "LLMJudgedMetric",
    "Batch",
    "BatchJudgedMetric",
    "parse_batch_labels",
    "family_prompt",
    "AnnotationUnit",
    "annotatable",
]

# --- what a metric reads -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ExemplarReference:
    cite_key: str
    arxiv_id: str | None  # resolved, version-less; None when the reference is not on arXiv
    title: str | None
    cited_by_count: int | None  # frozen at release time
    is_important: bool | None
    doi: str | None = None  # resolved, else as the bibliography gave it


@dataclass(frozen=True)
class NuggetInfo:
    idx: int
    text: str
    importance: str  # vital | okay


@dataclass(frozen=True)
class QueryInfo:
    release_id: str
    arxiv_id: str
    title: str
    abstract: str
    published: datetime | None
    exemplar_text: str  # the human related-work section, cleaned; citations appear as [@key]
    exemplar_references: tuple[ExemplarReference, ...] = ()
    nuggets: tuple[NuggetInfo, ...] = ()
    # Per family, the per-query release data its metrics read (a track's artefacts: RACE's rubric, the claims
    # track's ground truth), as the family's QUERY_DATA builds it; a family without rows for the query is absent.
    family_data: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def important_arxiv(self) -> tuple[ExemplarReference, ...]:
        """E: the exemplar's references labelled important that are on arXiv."""
        return tuple(r for r in self.exemplar_references if r.arxiv_id and r.is_important)

    @property
    def arxiv_references(self) -> tuple[ExemplarReference, ...]:
        """S*: the exemplar's references that are on arXiv."""
        return tuple(r for r in self.exemplar_references if r.arxiv_id)


@dataclass(frozen=True)
class SourceDoc:
    idx: int  # [idx] in the report text
    arxiv_id: str | None  # version-less
    title: str | None
    text: str  # what the judge reads as this source: the snippet the system saw, else title + abstract
    abstract: str | None = None  # from the corpus, when the paper is there
    cited_by_count: int | None = None  # frozen for the release (source_cited_by)
    doi: str | None = None  # from the corpus, when the paper is there


@dataclass(frozen=True)
class ReportContext:
    report_id: int
    release_id: str
    system_id: str
    system_kind: str
    arxiv_id: str
    text: str
    query: QueryInfo
    sources: dict[int, SourceDoc]  # by idx
    sentences: tuple[Sentence, ...]  # the report body's sentences with their cited numbers

    @property
    def is_human_exemplar(self) -> bool:
        return self.system_kind == "human_exemplar"

    @property
    def cited_sources(self) -> tuple[SourceDoc, ...]:
        """Sources actually cited in the text (a stored bibliography entry nobody cites is not cited)."""
        cited = dict.fromkeys(n for s in self.sentences for n in s.citations)
        return tuple(self.sources[n] for n in cited if n in self.sources)

    @cached_property
    def cited_papers(self) -> tuple[Paper[SourceDoc], ...]:
        """The distinct papers the report cites (evaluation/metrics/papers.py), in first-cited order."""
        return tuple(resolve_papers(self.cited_sources))

    @property
    def cited_arxiv_papers(self) -> tuple[Paper[SourceDoc], ...]:
        """S: the cited papers with an arXiv key, in first-cited order (a paper cited as `hep-th/9901001v2`
        under one number and `HEP-TH/9901001` under another is one)."""
        return tuple(p for p in self.cited_papers if p.arxiv_ids)

    @property
    def cited_arxiv_ids(self) -> tuple[str, ...]:
        """S as arXiv keys (version-less, arXiv's own case), in first-cited order."""
        return tuple(p.arxiv_key for p in self.cited_arxiv_papers if p.arxiv_key)

    @cached_property
    def _paper_of_number(self) -> dict[int, tuple[SourceDoc, ...]]:
        return {s.idx: tuple(paper.entries) for paper in self.cited_papers for s in paper.entries}

    def paper_number(self, number: int) -> int:
        """The first-cited number naming the same paper as `number` (evaluation/metrics/papers.py: one paper cited as
        [3] and [5] is one paper), so pairs and batches are counted per paper; `number` itself when it names
        no stored source."""
        same = self._paper_of_number.get(number)
        return same[0].idx if same else number

    def paper_sources(self, number: int) -> tuple[SourceDoc, ...]:
        """The stored sources naming the same paper as `number`, first-cited first; () when it names none."""
        return self._paper_of_number.get(number, ())

    def cited_arxiv_sources(self) -> tuple[SourceDoc, ...]:
        """One SourceDoc per paper of S: its first cited entry that carries an arXiv id."""
        return tuple(p.first_with_arxiv_id() for p in self.cited_arxiv_papers)


# --- what a metric produces --------------------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    key: str  # stable within (report, metric): the judgments row's item_key
    payload: Any = None


@dataclass(frozen=True)
class ItemJudgment:
    key: str
    label: Any  # JSON-serialisable parsed answer; None when unscored
    unscored_reason: str | None = None
    explanation: str | None = None
    calls: int = 0
    request_hashes: tuple[str, ...] = ()  # its calls' llm_calls keys (set by the runner), for costs

    @property
    def scored(self) -> bool:
        return self.unscored_reason is None


@dataclass(frozen=True)
class Score:
    variant: str
    value: float | None
    unscored_reason: str | None = None
    n_items: int = 0
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class AnnotationUnit:
    """One question a human can answer about one judged item: the whole item, or one sub-item of a batch.

    Judge validation (evaluation/judge_validation/annotation.py, rater_agreement.py) compares a judge's answer with a
    human's, or two judges' answers, unit by unit, so every judged metric says once how its stored label
    reads as one of its `annotation_labels` (`judge_label`) and what a human must read to answer
    (`content`: field name -> plain text, besides the query paper's title and abstract, which every
    annotation file carries)."""

    sub_key: str  # '' for the whole item; else the sub-item's 1-based position within the batch
    content: dict[str, str]
    judge_label: str | None  # the judge's answer as one of the metric's annotation_labels; None: unscored


def annotatable(metric: Any) -> bool:
    """Whether a metric can be validated against human labels: it asks a judge and says how a human
    answers the same question (`annotation_question`, `annotation_labels`, `annotation_units`)."""
    return all(hasattr(metric, a) for a in ("annotation_question", "annotation_labels", "annotation_units"))


def unscored_item(key: str, reason: str, calls: int = 0) -> ItemJudgment:
    return ItemJudgment(key=key, label=None, unscored_reason=reason, calls=calls)


def judgments_in_order(items: Sequence[Item], judgments: Sequence[ItemJudgment], missing: str) -> list[ItemJudgment]:
    """One judgment per item, in items() order; an item nobody judged is unscored with `missing` as reason."""
    by_key = {j.key: j for j in judgments}
    return [by_key.get(it.key) or unscored_item(it.key, missing) for it in items]


def report_unscored(variants: Sequence[str], judgments: Sequence[ItemJudgment]) -> list[Score] | None:
    """Every variant unscored when any item is, naming how many and the first reason; else None."""
    failed = [j for j in judgments if not j.scored]
    if not failed:
        return None
    reason = f"{len(failed)} of {len(judgments)} items unscored; first: {failed[0].key}: {failed[0].unscored_reason}"
    return [Score(v, None, reason, n_items=len(judgments)) for v in variants]


@runtime_checkable
class Metric(Protocol):
    """One metric: one file in deepscholar.evaluation.metrics exporting METRIC (evaluation/metrics/registry.py
    finds it), or any object registered with registry.register().

    Its items and judgments depend on the report's content only (text, cited sources, query, and whether
    it is the human exemplar), never on its system or report id: a judge task judges equal reports once
    (runner.content_key)."""

    name: str  # e.g. "organization"; also its column name in the wide SQL views
    dimension: str  # one of registry.dimension_declarations(): the leaderboard's column group
    position: int  # its column within the dimension
    label: str  # the column heading (CLI table, page, markdown)
    headline: str  # the variant the leaderboard shows
    variants: tuple[str, ...]  # every variant score() returns, headline included

    @property
    def version(self) -> str:
        """metric_version: the definition's version plus every prompt's version; a change to either bumps it."""
        ...

    def items(self, report: ReportContext) -> list[Item]:
        """The questions to ask about this report; [] for metrics computed without a judge."""
        ...

    def judge_llm(self, client: LLMClient, report: ReportContext, item: Item) -> ItemJudgment:
        """Answer one item with the LLM judge (client.ask with this metric's prompt); never raises for a bad answer."""
        ...

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        """Answer all items of one report with the offline embedding judge, in order, deterministically."""
        ...

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        """One Score per variant from this report's judgments (in items() order)."""
        ...

    # Optional: `prepare(engine, release_id)`, run once before a judge task judges any report, for data the
    # metric needs fixed for the whole release (document_importance freezes cited-by counts there).
    #
    # Optional, for judge validation (every judged metric has it; `annotatable()`):
    #   annotation_question: str          the question in plain words, as a human annotator reads it
    #   annotation_labels: tuple[str, ...] the answers allowed, in the order a form lists them
    #   annotation_units(report, item, label) -> list[AnnotationUnit]
    #       the units of one stored judgment (`label` as in `judgments.label`, None when unscored), in a
    #       fixed order, each with the judge's answer mapped onto annotation_labels. An item decided without
    #       asking the judge (a citation naming no source text) has no unit: there is no judge answer to
    #       validate and nothing for a human to read.
    #   paper_human_agreement: float | None
    #       the judge-human agreement the DeepScholar paper measured by hand for this metric (the page's
    #       reference column; read with getattr, None when the paper validated no such metric).


def compose_version(definition: str, *prompt_versions: str) -> str:
    """metric_version = definition version + the versions of the prompts it uses, e.g. 'd1+organization_v1'."""
    return "+".join((definition, *prompt_versions))


class JudgeFreeMetric:
    """A metric computed from the report and the release's frozen labels alone: no items, no judge calls."""

    name: str
    headline = "score"
    variants: tuple[str, ...] = ("score",)
    definition = "d1"
    calls_per_report = 0.0  # see LLMJudgedMetric.calls_per_report
    bounded = True  # see LLMJudgedMetric.bounded

    @property
    def version(self) -> str:
        return compose_version(self.definition)

    def items(self, report: ReportContext) -> list[Item]:
        return []  # METRICS.md: 0 judge calls per report

    def judge_llm(self, client: LLMClient, report: ReportContext, item: Item) -> ItemJudgment:
        raise RuntimeError(f"{self.name} has no items to judge")

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        return []


def family_prompt(metric: object, name: str) -> Prompt:
    """`<the metric's family package>/prompts/<name>.txt`: a family's prompts live in its folder. A metric
    defined elsewhere (a test's) that uses a family's prompt names that package as `prompt_package`."""
    from deepscholar.prompts import load_prompt_file

    package = getattr(metric, "prompt_package", None) or type(metric).__module__.rpartition(".")[0]
    return load_prompt_file(package, name)


class LLMJudgedMetric:
    """Base of the metrics an LLM judges one item at a time, so each states only what is its own.

    A subclass names its prompt file (`prompt_name`) and definition version (`definition`), and says
    - what the prompt is filled with for one item (`prompt_fields`; or an `ItemJudgment` when the item is
      decided without asking, e.g. a citation that resolves to nothing),
    - how an answer is read (`parse`, raising ParseError for a re-ask), and what label it gives
      (`label_of` -> (label, explanation)),
    - the scores of a report (`score_judged`), after the shared opening: a report scored by construction
      (`fixed_scores`), then unscored when any item is, then the metric's own arithmetic.
    The render -> ask -> unscored-or-judgment body and that opening are written once, here.
    """

    name: str
    headline: str
    variants: tuple[str, ...]
    prompt_name: str
    definition: str = "d1"
    # About how many judge calls one report takes (cached ones included); only balances a month's judge
    # tasks (evaluation.jobs), never part of a score. Measured on the demo month by bench/evaluation.py.
    calls_per_report: float = 1.0
    # Scores live in [0, 1]. False for a count (FACT's effective citations): the board then neither clips
    # its bootstrap interval to [0, 1] nor checks its mean against that range.
    bounded: bool = True
    # The DeepScholar paper's judge-human agreement for this metric, when it measured one (Metric protocol).
    paper_human_agreement: float | None = None
    # The most tokens one answer may take (llm/answer_shapes.py); `answer_budget` when it grows with the item.
    answer_tokens: int = answer_shapes.EXPLAINED_BUDGET

    def __init__(self) -> None:
        self.prompt = family_prompt(self, self.prompt_name)

    def answer_budget(self, item: Item) -> int:
        """max_tokens of the question about `item`: a cut answer is re-asked, then unscored."""
        return self.answer_tokens

    @property
    def fixed_answer_budget(self) -> int | None:
        """The budget of every question of this metric, None when it grows with the item (answer_budget
        overridden: a label per nugget, an analysis per RACE criterion)."""
        return self.answer_tokens if type(self).answer_budget is LLMJudgedMetric.answer_budget else None

    def answer_schema(self, item: Item) -> dict[str, Any] | None:
        """The answer's JSON schema, what `parse` accepts; sent when the judge constrains its output."""
        return None

    @property
    def version(self) -> str:
        return compose_version(self.definition, self.prompt.version)

    @property
    def purpose(self) -> str:
        """How the llm_calls log names this metric's calls."""
        return f"metric.{self.name}"

    # -- what a subclass states --

    def prompt_fields(self, report: ReportContext, item: Item) -> dict[str, Any] | ItemJudgment:
        raise NotImplementedError

    def parse(self, text: str, item: Item) -> Any:
        raise NotImplementedError

    def label_of(self, item: Item, answer: Any) -> tuple[Any, str | None]:
        """(label stored in judgments, the judge's explanation) from a parsed answer."""
        raise NotImplementedError

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        """Scores that need no judgment (by construction, nothing to judge); None to score the judgments."""
        return None

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        """The judgments score_judged reads; metrics whose every item must be present override this."""
        return list(judgments)

    def score_judged(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        raise NotImplementedError

    # -- written once --

    def ask(self, client: LLMClient, item: Item, **fields: Any):
        """One judged question with this metric's prompt: a `Judged` (scored, or unscored with its reason)."""
        prompt = self.prompt.render(**fields)
        return client.ask([{"role": "user", "content": prompt}], lambda text: self.parse(text, item),
                          purpose=self.purpose, max_tokens=self.answer_budget(item), schema=self.answer_schema(item))

    def judge_llm(self, client: LLMClient, report: ReportContext, item: Item) -> ItemJudgment:
        fields = self.prompt_fields(report, item)
        if isinstance(fields, ItemJudgment):
            return fields
        judged = self.ask(client, item, **fields)
        if not judged.scored:
            return unscored_item(item.key, judged.unscored_reason, judged.calls)
        label, explanation = self.label_of(item, judged.value)
        return ItemJudgment(item.key, label, explanation=explanation, calls=judged.calls)

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        fixed = self.fixed_scores(report)
        if fixed is not None:
            return fixed
        ordered = self.in_order(report, judgments)
        return report_unscored(self.variants, ordered) or self.score_judged(report, ordered)


# --- one call, many sub-items --------------------------------------------------------------------------

@dataclass(frozen=True)
class Batch:
    """The payload of a batch-judged item: the sub-items one call judges, in the prompt's order (each one
    line of text, distinct), and whatever else the metric needs to know about the item (`about`)."""

    texts: tuple[str, ...]
    about: Any = None


def parse_batch_labels(text: str, count: int, labels: Sequence[str]) -> list[str]:
    """A JSON array of exactly `count` strings, each one of `labels` (case and surrounding space aside),
    strictly: anything else is a ParseError, so the client re-asks and in the end leaves the item unscored."""
    from deepscholar.llm.client import ParseError, parse_json_array

    answers = parse_json_array(text)
    if len(answers) != count:
        raise ParseError(f"expected exactly {count} labels, one per numbered line, got {len(answers)}")
    out = []
    for n, answer in enumerate(answers, 1):
        label = answer.strip().lower() if isinstance(answer, str) else answer
        if label not in labels:
            raise ParseError(f"label {n} must be one of {', '.join(map(repr, labels))}; got {answer!r}")
        out.append(label)
    return out


class BatchJudgedMetric(LLMJudgedMetric):
    """Base of the metrics whose one judge call labels many sub-items (FACT: every statement citing one
    source, asked in one call about that source).

    The item is the batch: one `judgments` row, keyed by what the batch is about (e.g. the source), its
    payload a `Batch` built by `batch()`, which keeps each sub-item's text on one line and each distinct
    text once (a sub-item repeated within an item is one question and one label). A subclass states
    - its items (`items`, each `self.batch(key, texts, about)`),
    - the labels the judge may give (`labels`) and what a sub-item is called in the stored label
      (`sub_item`, e.g. "statement"),
    - what else its prompt is filled with (`batch_fields`), or an `ItemJudgment` when the batch is decided
      without asking (`decided()` gives every sub-item one label, no call),
    - the scores (`score_judged`, reading the labels with `sub_labels`).
    Its prompt receives the sub-items as `{{sub_items}}`, numbered one per line ("1. ..."), and their
    number as `{{count}}`; the answer must be a JSON array of exactly `count` labels, in order
    (parse_batch_labels). The stored label is the list [{sub_item: text, "label": label}, ...], so each
    sub-item's verdict shows in the drill-down. A batch the judge cannot answer after the re-asks is
    unscored as a whole, and so is the report (LLMJudgedMetric.score): never a zero.
    """

    labels: tuple[str, ...]
    sub_item: str = "text"

    def batch(self, key: str, texts: Sequence[str], about: Any = None) -> Item:
        """An item judging `texts` in one call: each on one line (runs of white space become one space),
        empty ones dropped, each distinct text once, in first-seen order."""
        lines = (" ".join(t.split()) for t in texts)
        return Item(key, Batch(tuple(dict.fromkeys(t for t in lines if t)), about))

    def batch_fields(self, report: ReportContext, item: Item) -> dict[str, Any] | ItemJudgment:
        """The prompt's fields besides sub_items and count; an ItemJudgment to decide without a call."""
        return {}

    def decided(self, item: Item, label: str, explanation: str) -> ItemJudgment:
        """Every sub-item of the item labelled `label` without asking anyone (0 calls)."""
        return ItemJudgment(item.key, self._labelled(item, [label] * len(item.payload.texts)),
                            explanation=explanation)

    def sub_labels(self, judgment: ItemJudgment, allowed: Sequence[str]) -> list[tuple[str, str]]:
        """[(sub-item text, label)] of a stored judgment; a label of another shape is a bug, not a score."""
        label = judgment.label
        if not (isinstance(label, list) and all(
                isinstance(e, dict) and isinstance(e.get(self.sub_item), str) and e.get("label") in allowed
                for e in label)):
            raise ValueError(f"{self.name}: label of {judgment.key} must be a list of {{{self.sub_item!r}: text, "
                             f"'label': one of {list(allowed)}}}, got {label!r}")
        return [(e[self.sub_item], e["label"]) for e in label]

    # -- written once --

    def prompt_fields(self, report: ReportContext, item: Item) -> dict[str, Any] | ItemJudgment:
        fields = self.batch_fields(report, item)
        if isinstance(fields, ItemJudgment):
            return fields
        texts = item.payload.texts
        return {**fields, "sub_items": "\n".join(f"{n}. {t}" for n, t in enumerate(texts, 1)), "count": len(texts)}

    def parse(self, text: str, item: Item) -> list[str]:
        return parse_batch_labels(text, len(item.payload.texts), self.labels)

    def answer_budget(self, item: Item) -> int:
        return answer_shapes.per_item_budget(len(item.payload.texts), answer_shapes.LABEL_BUDGET)

    def answer_schema(self, item: Item) -> dict[str, Any]:
        return answer_shapes.labels_schema(self.labels, len(item.payload.texts))

    def label_of(self, item: Item, answer: list[str]) -> tuple[list[dict], None]:
        return self._labelled(item, answer), None

    def _labelled(self, item: Item, labels: Sequence[str]) -> list[dict]:
        return [{self.sub_item: text, "label": label} for text, label in zip(item.payload.texts, labels, strict=True)]

    # -- judge validation (Metric protocol: annotation_question, annotation_labels, annotation_units) --

    annotation_question: str
    annotation_labels: tuple[str, ...]  # what a human may answer per sub-item, in the form's order

    def annotation_content(self, report: ReportContext, item: Item, fields: dict[str, Any],
                           text: str) -> dict[str, str]:
        """What a human reads to label one sub-item: the prompt's other fields, as text, and the sub-item."""
        return {**{k: str(v) for k, v in fields.items()}, self.sub_item: text}

    def annotation_units(self, report: ReportContext, item: Item, label: Any) -> list[AnnotationUnit]:
        """One unit per sub-item (sub_key its 1-based position in the batch), with that sub-item's stored
        label; none for a batch decided without asking (nothing was judged, nothing to read)."""
        fields = self.batch_fields(report, item)
        if isinstance(fields, ItemJudgment):
            return []
        by_text = {e.get(self.sub_item): e.get("label") for e in label if isinstance(e, dict)} \
            if isinstance(label, list) else {}
        allowed = set(self.annotation_labels)
        units = []
        for n, text in enumerate(item.payload.texts, 1):
            given = by_text.get(text)
            units.append(AnnotationUnit(str(n), self.annotation_content(report, item, fields, text),
                                        given if given in allowed else None))
        return units
