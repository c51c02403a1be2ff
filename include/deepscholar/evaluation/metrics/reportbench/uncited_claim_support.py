"""Uncited claim support (ReportBench track, Faithfulness): are the facts a report states without a citation
backed by the literature?

Definition: docs/METRICS.md, "`uncited_claim_support`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.reportbench.uncited_claim_support`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from deepscholar.clock import assume_utc
from deepscholar.evaluation.metrics.base import (
    AnnotationUnit,
    Item,
    ItemJudgment,
    LLMJudgedMetric,
    ReportContext,
    Score,
    compose_version,
    family_prompt,
    judgments_in_order,
    unscored_item,
)
from deepscholar.evaluation.metrics.fact.base import states_something
from deepscholar.evaluation.metrics.papers import arxiv_key
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import ParseError, parse_json_array, parse_json_object
from deepscholar.search import registry as search_registry
from deepscholar.search.base import SearchResult, SearchScope, SearchTool

if TYPE_CHECKING:
    from deepscholar.llm.client import LLMClient

__all__ = ["METRIC", "UncitedClaimSupport", "EvidenceScope", "SearchFor", "VERDICTS", "EVIDENCE_K",
           "SEARCH_BACKEND", "SUPPORT_COSINE", "MIN_WORDS", "uncited_sentences", "heuristic_claim",
           "parse_claims", "parse_verdict"]

NAME = "uncited_claim_support"
ITEM_KEY = "uncited"
SUPPORTED, CONTRADICTED, NOT_ENOUGH = "supported", "contradicted", "not_enough_evidence"
VERDICTS = (SUPPORTED, CONTRADICTED, NOT_ENOUGH)
EVIDENCE_K = 5  # papers retrieved per claim
SEARCH_BACKEND = search_registry.DEFAULT  # "local": BM25 over the warehouse corpus
# Local judge: claim coverage's bar for full support (cited_statement_match uses it too).
SUPPORT_COSINE = 0.65
MIN_WORDS = 8
# A sentence opening like this speaks of the report, not of the world (compared case-insensitively).
_ABOUT_THE_REPORT_RE = re.compile(
    r"(we|our|this section|in this section|this report|this review|this survey)\b", re.IGNORECASE)
_DIGIT_RE = re.compile(r"[0-9]")  # ASCII only: `\d` takes any Unicode digit
_OPENERS = "(\"'“‘[*_"

SearchFor = Callable[[SearchScope], SearchTool]


@dataclass(frozen=True)
class EvidenceScope:
    """What binds the evidence search to one query (search.SearchScope): the query paper, excluded, and
    its publication date, the cutoff."""

    arxiv_id: str
    cutoff: datetime


# --- what is asked -----------------------------------------------------------------------------------

def uncited_sentences(report: ReportContext) -> tuple[tuple[int, str], ...]:
    """(number, text) of the report's sentences without a citation that state something; the number is
    the sentence's 1-based place in the report, the text on one line."""
    out = []
    for sentence in report.sentences:
        text = " ".join(sentence.text.split())
        if not sentence.citations and states_something(text):
            out.append((sentence.index + 1, text))
    return tuple(out)


def _capitalised(word: str) -> bool:
    w = word.lstrip(_OPENERS)
    return bool(w) and "A" <= w[0] <= "Z"


def heuristic_claim(text: str) -> bool:
    """The local judge's extraction: does this uncited sentence look like a checkable factual claim?

    At least MIN_WORDS words; a digit, or a capitalised multi-word name (two words in a row starting
    with a capital, the first not ending in punctuation) anywhere after the sentence's first word; and
    not opening with a statement about the report ("We", "Our", "This section", "In this section",
    "This report", "This review", "This survey")."""
    words = text.split()
    if len(words) < MIN_WORDS or _ABOUT_THE_REPORT_RE.match(text.lstrip(_OPENERS)):
        return False
    if _DIGIT_RE.search(text):
        return True
    return any(_capitalised(a) and _capitalised(b) and a.rstrip(")\"'”’*_")[-1:] not in ",.;:!?"
               for a, b in zip(words[1:], words[2:], strict=False))


def parse_claims(text: str, numbers: Sequence[int]) -> list[tuple[int, str]]:
    """[(sentence number, claim)] from the judge's JSON array, in sentence order, strictly: each element
    an object with exactly the keys "sentence" (one of `numbers`, each at most once) and "claim" (a
    non-empty string, its white space made single spaces); [] when nothing is checkable."""
    allowed = set(numbers)
    answers = parse_json_array(text)
    out: dict[int, str] = {}
    for i, entry in enumerate(answers, 1):
        if not isinstance(entry, dict) or set(entry) != {"sentence", "claim"}:
            raise ParseError(f'element {i} must be an object with exactly the keys "sentence" and "claim"')
        n, claim = entry["sentence"], entry["claim"]
        if not isinstance(n, int) or isinstance(n, bool) or n not in allowed:
            raise ParseError(f'element {i}: "sentence" must be one of the listed numbers '
                             f"({', '.join(map(str, sorted(allowed)))}); got {n!r}")
        if n in out:
            raise ParseError(f"element {i}: sentence {n} is listed twice; give at most one claim per sentence")
        if not isinstance(claim, str) or not claim.strip():
            raise ParseError(f'element {i}: "claim" must be a non-empty string')
        out[n] = " ".join(claim.split())
    return sorted(out.items())


def parse_verdict(text: str, n_papers: int) -> tuple[str, list[int], str]:
    """(verdict, paper numbers it rests on, reason) from the judge's JSON object, strictly: the verdict one
    of VERDICTS (case and surrounding space aside), the papers distinct numbers 1..n_papers, at least one
    for supported or contradicted and none for not_enough_evidence, the reason a non-empty string."""
    obj = parse_json_object(text)
    verdict, papers, reason = obj.get("verdict"), obj.get("papers"), obj.get("reason")
    verdict = verdict.strip().lower() if isinstance(verdict, str) else verdict
    if verdict not in VERDICTS:
        raise ParseError(f'"verdict" must be one of {", ".join(map(repr, VERDICTS))}; got {obj.get("verdict")!r}')
    if not isinstance(papers, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in papers):
        raise ParseError('"papers" must be a JSON array of paper numbers')
    if any(not 1 <= p <= n_papers for p in papers) or len(set(papers)) != len(papers):
        raise ParseError(f'"papers" must be distinct numbers from 1 to {n_papers}; got {papers}')
    if verdict == NOT_ENOUGH and papers:
        raise ParseError(f'"papers" must be [] when the verdict is {NOT_ENOUGH}')
    if verdict != NOT_ENOUGH and not papers:
        raise ParseError(f'"papers" must name the paper(s) the verdict "{verdict}" rests on')
    if not isinstance(reason, str) or not reason.strip():
        raise ParseError('"reason" must be a non-empty string')
    return verdict, papers, reason.strip()


CLAIM_ANSWER_TOKENS = 96  # one extracted claim: a sentence's checkable statement, restated


def claims_answer(numbers: Sequence[int]) -> dict[str, Any]:
    """The extraction's budget and schema: at most one claim per listed sentence."""
    element = answer_shapes.object_schema({"sentence": {"type": "integer", "enum": list(numbers)},
                                           "claim": answer_shapes.TEXT})
    return {"max_tokens": answer_shapes.per_item_budget(len(numbers), CLAIM_ANSWER_TOKENS),
            "schema": answer_shapes.array_of(element) | {"maxItems": len(numbers)}}


def verdict_answer(n_papers: int) -> dict[str, Any]:
    """A verdict's budget and schema: the verdict, the papers it rests on (1..n), a reason."""
    paper = {"type": "integer", "minimum": 1, "maximum": n_papers}
    return {"max_tokens": answer_shapes.EXPLAINED_BUDGET, "schema": answer_shapes.object_schema(
        {"verdict": {"type": "string", "enum": list(VERDICTS)}, "papers": answer_shapes.array_of(paper),
         "reason": answer_shapes.TEXT})}


def _evidence_text(paper: SearchResult) -> str:
    return " ".join(f"{paper.title}. {paper.abstract or ''}".split())


def render_evidence(papers: Sequence[SearchResult]) -> str:
    """The verdict prompt's papers: "n. Title" and its abstract, a blank line between papers."""
    return "\n\n".join(f"{n}. {' '.join((p.title or '').split())}\n{' '.join((p.abstract or '').split())}".rstrip()
                       for n, p in enumerate(papers, 1))


def _paper(p: SearchResult) -> dict:
    return {"arxiv_id": p.arxiv_id, "title": " ".join((p.title or "").split()),
            "published": assume_utc(p.published).date().isoformat() if p.published else None}


def _checked(n: int, sentence: str, claim: str, evidence: Sequence[SearchResult], verdict: str,
             papers: Sequence[int], reason: str) -> dict:
    """One claim of the stored label: what was checked, against what, and the outcome."""
    return {"sentence": n, "text": sentence, "claim": claim, "evidence": [_paper(p) for p in evidence],
            "verdict": verdict, "papers": [evidence[i - 1].arxiv_id for i in papers], "reason": reason}


# --- the metric --------------------------------------------------------------------------------------

class UncitedClaimSupport(LLMJudgedMetric):
    name = NAME
    dimension = "faithfulness"
    position = 2  # column within the dimension (cited_statement_match is 1)
    label = "Uncited support"
    headline = "score"
    variants = ("score",)
    # 1 extraction + one verdict per extracted claim with evidence, for a report with uncited sentences; 0
    # for one without. On the demo month only the human exemplars have any (5.8 each): 1.2 calls per report
    # there with the scripted judge of tests/support/judge_stub.py (two claims in three sentences). Months
    # of LLM-written reports, with more uncited prose, ask more. Balances judge tasks only (evaluation.jobs).
    calls_per_report = 1.2

    prompt_name = "uncited_claim_extract_v1"
    verdict_prompt_name = "uncited_claim_verdict_v1"
    # d1: one claim per uncited sentence at most; EVIDENCE_K papers of the `local` backend before the cutoff.
    definition = "d1"

    def __init__(self) -> None:
        super().__init__()
        self.verdict_prompt = family_prompt(self, self.verdict_prompt_name)
        self._search_for: dict[str, SearchFor] = {}
        self._bind_lock = threading.Lock()

    @property
    def version(self) -> str:
        return compose_version(self.definition, self.prompt.version, self.verdict_prompt.version)

    # -- the evidence search, bound per release --

    def prepare(self, engine, release_id: str) -> None:
        """Before judging (runner._prepare): bind the release's evidence search to this warehouse."""
        from deepscholar.search import make_search

        self.bind(release_id, lambda scope: make_search(SEARCH_BACKEND, engine, scope))

    def bind(self, release_id: str, search_for: SearchFor) -> None:
        """Judge the release's reports with the SearchTool `search_for(scope)` gives for a query's scope."""
        with self._bind_lock:
            self._search_for[release_id] = search_for

    def unbind(self, release_id: str) -> None:
        with self._bind_lock:
            self._search_for.pop(release_id, None)

    def _scope(self, report: ReportContext) -> tuple[SearchTool, EvidenceScope] | str:
        """The query's bound search and scope, or why there is none (an unscored reason)."""
        search_for = self._search_for.get(report.release_id)
        if search_for is None:
            raise RuntimeError(f"{NAME}: no evidence search is bound for release {report.release_id}; the runner "
                               "binds it with prepare(engine, release_id) before judging (a test: bind())")
        if report.query.published is None:
            return (f"query {report.query.arxiv_id} has no publication date: no cutoff to search the corpus "
                    "before, so no evidence")
        scope = EvidenceScope(report.query.arxiv_id, assume_utc(report.query.published))
        return search_for(scope), scope

    @staticmethod
    def evidence(tool: SearchTool, scope: EvidenceScope, claim: str) -> list[SearchResult]:
        """The top EVIDENCE_K papers for the claim: dated strictly before the cutoff, never the query paper,
        each paper once (the backend promises the first two; they are checked again here)."""
        query_id = arxiv_key(scope.arxiv_id)
        out: list[SearchResult] = []
        seen: set[str] = set()
        for paper in tool.search(claim, k=EVIDENCE_K):
            pid = arxiv_key(paper.arxiv_id)
            if paper.published is None or assume_utc(paper.published) >= scope.cutoff or pid == query_id:
                continue
            if pid is not None:
                if pid in seen:
                    continue
                seen.add(pid)
            out.append(paper)
        return out[:EVIDENCE_K]

    # -- judge validation --

    # One unit per claim the judge extracted (sub_key: its sentence's number in the report, at most one claim
    # per sentence), asking the verdict against the evidence papers the search found for it. The extraction
    # itself is not validated: which claims exist is the judge's answer, so an unscored judgment (or one
    # extracting nothing) gives no unit, and two judges are compared on the sentences both extracted.
    annotation_question = ("Do the evidence papers listed (found by searching the literature published before "
                           "the query paper) support the claim, contradict it, or neither? Look the papers up by "
                           "their arXiv ids.")
    annotation_labels = VERDICTS

    def annotation_units(self, report: ReportContext, item: Item, label: Any) -> list[AnnotationUnit]:
        claims = label.get("claims") if isinstance(label, dict) else None
        units = []
        for c in claims if isinstance(claims, list) else []:
            if not isinstance(c, dict) or not isinstance(c.get("sentence"), int):
                continue
            evidence = "\n".join(
                f"{n}. {p.get('title') or '(untitled)'} (arXiv {p.get('arxiv_id') or 'id unknown'}"
                f"{', ' + p['published'] if p.get('published') else ''})"
                for n, p in enumerate(c.get("evidence") or [], 1) if isinstance(p, dict)) or "(no paper found)"
            units.append(AnnotationUnit(str(c["sentence"]), {
                "sentence": str(c.get("text") or ""), "claim": str(c.get("claim") or ""), "evidence": evidence},
                c.get("verdict") if c.get("verdict") in VERDICTS else None))
        return units

    # -- what is judged --

    def items(self, report: ReportContext) -> list[Item]:
        """One item, the report's uncited sentences ((number, text) pairs); none when it has none."""
        sentences = uncited_sentences(report)
        return [Item(ITEM_KEY, sentences)] if sentences else []

    def judge_llm(self, client: LLMClient, report: ReportContext, item: Item) -> ItemJudgment:
        """Extraction, then per claim the search and a verdict: 1 + (claims with evidence) calls."""
        bound = self._scope(report)
        if isinstance(bound, str):
            return unscored_item(item.key, bound)
        tool, scope = bound
        sentences = dict(item.payload)
        paper = f"{' '.join(report.query.title.split())}\n\n{' '.join(report.query.abstract.split())}".strip()
        prompt = self.prompt.render(paper=paper, report=report.text.strip(),
                                    sentences="\n".join(f"{n}. {t}" for n, t in item.payload))
        extracted = client.ask([{"role": "user", "content": prompt}], lambda text: parse_claims(text, list(sentences)),
                               purpose=f"{self.purpose}.extract", **claims_answer(list(sentences)))
        calls = extracted.calls
        if not extracted.scored:
            return unscored_item(item.key, f"claim extraction: {extracted.unscored_reason}", calls)
        claims: list[dict] = []
        for i, (n, claim) in enumerate(extracted.value or [], 1):
            found = self.evidence(tool, scope, claim)
            if not found:
                claims.append(_checked(n, sentences[n], claim, [], NOT_ENOUGH, [],
                                       "the search found no paper before the cutoff for this claim (no call)"))
                continue
            asked = self.verdict_prompt.render(claim=claim, evidence=render_evidence(found))
            judged = client.ask([{"role": "user", "content": asked}],
                                partial(parse_verdict, n_papers=len(found)), purpose=f"{self.purpose}.verdict",
                                **verdict_answer(len(found)))
            calls += judged.calls
            if not judged.scored:
                return unscored_item(item.key, f"claim {i} (sentence {n}): {judged.unscored_reason}", calls)
            assert judged.value is not None  # a scored answer has its value
            verdict, papers, reason = judged.value
            claims.append(_checked(n, sentences[n], claim, found, verdict, papers, reason))
        return ItemJudgment(item.key, self._label(scope, item, claims), explanation=_summary(claims, len(sentences)),
                            calls=calls)

    def judge_local(self, report: ReportContext, items: Sequence[Item]) -> list[ItemJudgment]:
        out = []
        for item in items:
            bound = self._scope(report)
            if isinstance(bound, str):
                out.append(unscored_item(item.key, bound))
                continue
            tool, scope = bound
            found = [(n, text, self.evidence(tool, scope, text)) for n, text in item.payload if heuristic_claim(text)]
            claims = [self._local_verdict(n, text, evidence) for n, text, evidence in found]
            out.append(ItemJudgment(item.key, self._label(scope, item, claims), explanation=(
                f"local embedding judge, not an LLM: {_summary(claims, len(item.payload))}; claims are the uncited "
                f"sentences of >= {MIN_WORDS} words with a digit or a capitalised multi-word name, supported when "
                f"the best cosine with an evidence paper's title and abstract is >= {SUPPORT_COSINE} (never "
                "contradicted)")))
        return out

    @staticmethod
    def _local_verdict(n: int, text: str, evidence: Sequence[SearchResult]) -> dict:
        if not evidence:
            return _checked(n, text, text, [], NOT_ENOUGH, [],
                            "the search found no paper before the cutoff for this claim")
        from deepscholar.llm import local_judge

        cosines = [round(float(c), 4) for c in local_judge.similarity([text], [_evidence_text(p) for p in evidence])[0]]
        best = max(range(len(cosines)), key=lambda j: (cosines[j], -j))  # the first of equal ones
        supported = cosines[best] >= SUPPORT_COSINE
        reason = (f"local judge ({local_judge.MODEL_ID}): best cosine {cosines[best]:.3f} with paper {best + 1}, "
                  f"{'>=' if supported else '<'} {SUPPORT_COSINE}")
        return _checked(n, text, text, evidence, SUPPORTED if supported else NOT_ENOUGH,
                        [best + 1] if supported else [], reason)

    @staticmethod
    def _label(scope: EvidenceScope, item: Item, claims: list[dict]) -> dict[str, Any]:
        return {"n_uncited_sentences": len(item.payload), "claims": claims,
                "search": {"backend": SEARCH_BACKEND, "k": EVIDENCE_K, "cutoff": scope.cutoff.isoformat(),
                           "excluded": scope.arxiv_id}}

    # -- scores --

    def fixed_scores(self, report: ReportContext) -> list[Score] | None:
        if self.items(report):
            return None
        return [Score(v, None, "nothing checkable: the report has no uncited sentence",
                      details={"n_uncited_sentences": 0, "n_claims": 0}) for v in self.variants]

    def in_order(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[ItemJudgment]:
        return judgments_in_order(self.items(report), judgments, "no judgment for the uncited sentences")

    def score_judged(self, report: ReportContext, ordered: Sequence[ItemJudgment]) -> list[Score]:
        (judgment,) = ordered
        label = _checked_label(judgment)
        verdicts = [c["verdict"] for c in label["claims"]]
        details = {"n_uncited_sentences": label["n_uncited_sentences"], "n_claims": len(verdicts),
                   **{f"n_{v}": verdicts.count(v) for v in VERDICTS},
                   "n_without_evidence": sum(not c["evidence"] for c in label["claims"])}
        if not verdicts:
            reason = (f"nothing checkable: none of the report's {label['n_uncited_sentences']} uncited sentences "
                      "makes a checkable factual claim")
            return [Score("score", None, reason, n_items=1, details=details)]
        return [Score("score", verdicts.count(SUPPORTED) / len(verdicts), n_items=1, details=details)]


def _summary(claims: Sequence[dict], n_sentences: int) -> str:
    counts = ", ".join(f"{sum(c['verdict'] == v for c in claims)} {v.replace('_', ' ')}" for v in VERDICTS)
    return f"{len(claims)} checkable claims in {n_sentences} uncited sentences: {counts}"


def _checked_label(judgment: ItemJudgment) -> dict:
    label = judgment.label
    if not (isinstance(label, dict) and isinstance(label.get("n_uncited_sentences"), int)
            and isinstance(label.get("claims"), list)
            and all(isinstance(c, dict) and c.get("verdict") in VERDICTS and isinstance(c.get("evidence"), list)
                    for c in label["claims"])):
        raise ValueError(f"{NAME}: label of {judgment.key} must be {{'n_uncited_sentences': int, 'claims': "
                         f"[{{..., 'evidence': [...], 'verdict': one of {list(VERDICTS)}}}]}}, got {label!r}")
    return label


METRIC = UncitedClaimSupport()
