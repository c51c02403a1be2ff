"""Release-time judges: importance labels for exemplar references and the exemplar's nuggets.

Both are made once per query when a release is built (METRICS.md: reference coverage, nugget coverage)
and stored with the judge_config that made them. Two backends share one protocol:
`LLMReleaseJudge` asks an LLM with our versioned prompts (prompts/*.txt); `LocalReleaseJudge` is an
offline, deterministic stand-in built on MiniLM embeddings — it approximates the criteria with
similarity heuristics and says so in every reason it gives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

from sqlalchemy.engine import Engine

from deepscholar.llm import answer_shapes
from deepscholar.llm.client import Judged, LLMClient, ParseError, parse_json_array, parse_json_object
from deepscholar.prompts import Prompt, load_prompt_file
from deepscholar.settings import current_settings
from deepscholar.text.markers import cited_keys, strip_citation_markers
from deepscholar.text.sentences import split_exemplar_sentences

__all__ = [
    "QueryContext",
    "ReferenceContext",
    "Nugget",
    "ReleaseJudge",
    "LLMReleaseJudge",
    "LocalReleaseJudge",
    "make_release_judge",
    "Prompt",
    "load_prompt",
    "MAX_NUGGETS",
]

MAX_NUGGETS = 30  # METRICS.md: nuggetize until no new nugget or a cap of 30


# --- data in and out -------------------------------------------------------------------------------

@dataclass(frozen=True)
class QueryContext:
    arxiv_id: str
    title: str
    abstract: str
    section_text: str  # cleaned related-work text; citations appear as [@key1; @key2]


@dataclass(frozen=True)
class ReferenceContext:
    cite_key: str
    title: str | None = None
    authors: str | Sequence[str] | None = None
    snippet: str | None = None  # the abstract when known, else the bibliography entry's text
    arxiv_id: str | None = None


@dataclass(frozen=True)
class Nugget:
    text: str
    importance: Literal["vital", "okay"]


@runtime_checkable
class ReleaseJudge(Protocol):
    config_id: str

    def label_importance(self, query: QueryContext, refs: Sequence[ReferenceContext]) -> list[Judged[bool]]:
        """One outcome per reference, in order; the reason is in `Judged.explanation`."""
        ...

    def nuggetize(self, query: QueryContext) -> Judged[list[Nugget]]:
        ...


def _normalise_nugget(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def _authors_text(authors: str | Sequence[str] | None) -> str:
    if not authors:
        return ""
    return authors if isinstance(authors, str) else ", ".join(authors)


# --- prompts ---------------------------------------------------------------------------------------

def load_prompt(name: str) -> Prompt:
    return load_prompt_file("deepscholar.release", name)


# --- LLM judge -------------------------------------------------------------------------------------

IMPORTANCE_ANSWER: dict[str, Any] = {"max_tokens": answer_shapes.EXPLAINED_BUDGET, "schema": answer_shapes.object_schema(
    {"important": {"type": "boolean"}, "reason": answer_shapes.TEXT})}
NUGGET_ANSWER_TOKENS = 64  # one nugget: a short factual statement


def nuggets_answer(remaining: int) -> dict[str, Any]:
    """A nugget round's budget and schema: at most `remaining` more nuggets."""
    return {"max_tokens": answer_shapes.per_item_budget(remaining, NUGGET_ANSWER_TOKENS),
            "schema": answer_shapes.array_of(answer_shapes.TEXT) | {"maxItems": remaining}}


def parse_importance(text: str) -> tuple[bool, str]:
    obj = parse_json_object(text)
    important, reason = obj.get("important"), obj.get("reason")
    if not isinstance(important, bool):
        raise ParseError('"important" must be the JSON literal true or false')
    if not isinstance(reason, str) or not reason.strip():
        raise ParseError('"reason" must be a non-empty string')
    return important, reason.strip()


def parse_nugget_list(text: str) -> list[str]:
    items = parse_json_array(text)
    if not all(isinstance(x, str) and x.strip() for x in items):
        raise ParseError("every element must be a non-empty string")
    return [" ".join(x.split()) for x in items]


def parse_labels(text: str, count: int) -> list[Literal["vital", "okay"]]:
    items = parse_json_array(text)
    if len(items) != count:
        raise ParseError(f"expected exactly {count} labels, got {len(items)}")
    labels = [x.strip().lower() if isinstance(x, str) else x for x in items]
    bad = [x for x in labels if x not in ("vital", "okay")]
    if bad:
        raise ParseError(f'every label must be "vital" or "okay", got {bad[0]!r}')
    return cast('list[Literal["vital", "okay"]]', labels)  # each checked just above


class LLMReleaseJudge:
    """The paper's judging procedure with our prompts; one client, so one cache and one concurrency bound."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self.importance_prompt = load_prompt("importance_v2")
        self.nuggetize_prompt = load_prompt("nuggetize_v2")
        self.labels_prompt = load_prompt("nugget_labels_v2")
        self.config_id = (f"llm:{client.model}:{self.importance_prompt.version}+"
                          f"{self.nuggetize_prompt.version}+{self.labels_prompt.version}")

    def label_importance(self, query: QueryContext, refs: Sequence[ReferenceContext]) -> list[Judged[bool]]:
        return self.client.map(lambda ref: self._importance(query, ref), refs)

    def _importance(self, query: QueryContext, ref: ReferenceContext) -> Judged[bool]:
        # The section keeps its markers here: where and how the reference is cited is the main evidence.
        prompt = self.importance_prompt.render(
            title=query.title, abstract=query.abstract, section=query.section_text, cite_key=ref.cite_key,
            ref_title=ref.title or "(unknown)", ref_authors=_authors_text(ref.authors) or "(unknown)",
            ref_snippet=ref.snippet or "(none)")
        judged = self.client.ask([{"role": "user", "content": prompt}], parse_importance,
                                 purpose="release.importance", **IMPORTANCE_ANSWER)
        if judged.value is None:
            return Judged(None, judged.unscored_reason, judged.calls)
        important, reason = judged.value
        return Judged(important, None, judged.calls, explanation=reason)

    def nuggetize(self, query: QueryContext) -> Judged[list[Nugget]]:
        section = _strip_markers_keep_paragraphs(query.section_text)
        nuggets: list[str] = []
        seen: set[str] = set()
        calls = rounds = 0
        while len(nuggets) < MAX_NUGGETS:
            rounds += 1
            listed = "\n".join(f"{i}. {n}" for i, n in enumerate(nuggets, 1)) or "(none yet)"
            prompt = self.nuggetize_prompt.render(
                title=query.title, abstract=query.abstract, section=section, count=len(nuggets),
                nuggets=listed, remaining=MAX_NUGGETS - len(nuggets))
            judged = self.client.ask([{"role": "user", "content": prompt}], parse_nugget_list,
                                     purpose="release.nuggetize", **nuggets_answer(MAX_NUGGETS - len(nuggets)))
            calls += judged.calls
            if judged.value is None:
                # A partial list would silently shrink the denominator of nugget coverage.
                return Judged(None, f"nugget extraction round {rounds}: {judged.unscored_reason}", calls)
            new = []
            for text in judged.value:
                key = _normalise_nugget(text)
                if key and key not in seen:
                    seen.add(key)
                    new.append(text)
            if not new:
                break
            nuggets.extend(new[:MAX_NUGGETS - len(nuggets)])
        if not nuggets:
            return Judged(None, "the judge found no nugget in the section", calls)

        listed = "\n".join(f"{i}. {n}" for i, n in enumerate(nuggets, 1))
        prompt = self.labels_prompt.render(title=query.title, abstract=query.abstract, section=section,
                                           nuggets=listed, count=len(nuggets))
        labelled = self.client.ask([{"role": "user", "content": prompt}],
                                   lambda text: parse_labels(text, len(nuggets)),
                                   purpose="release.nugget_labels", max_tokens=answer_shapes.per_item_budget(
                                       len(nuggets), answer_shapes.LABEL_BUDGET),
                                   schema=answer_shapes.labels_schema(("vital", "okay"), len(nuggets)))
        calls += labelled.calls
        if labelled.value is None:
            return Judged(None, f"nugget labelling: {labelled.unscored_reason}", calls)
        result = [Nugget(text, label) for text, label in zip(nuggets, labelled.value, strict=True)]
        n_vital = sum(n.importance == "vital" for n in result)
        return Judged(result, None, calls, explanation=(
            f"{len(result)} nuggets extracted by {self.client.model} in {rounds} rounds"
            f"{' (cap reached)' if len(result) == MAX_NUGGETS else ''}; {n_vital} labelled vital"))


def _strip_markers_keep_paragraphs(text: str) -> str:
    return "\n\n".join(s for s in (strip_citation_markers(p) for p in re.split(r"\n\s*\n", text)) if s)


# --- local judge -----------------------------------------------------------------------------------

LOCAL_VERSION = "v1"
MIN_NUGGET_WORDS = 5
DUPLICATE_COSINE = 0.9
CITATION_BONUS_PER_SENTENCE = 0.05  # per citing sentence beyond the first
CITATION_BONUS_MAX = 0.15


class LocalReleaseJudge:
    """Offline and deterministic: embedding heuristics standing in for an LLM's reading.

    Importance: a reference scores by how close its title+snippet is to the sentences citing it (the
    abstract when no sentence does), plus a bonus per extra citing sentence; the top third (>= 1) are
    important. Nuggets: the exemplar's own sentences (markers stripped, near-duplicates merged, <= 30);
    vital = the half closest to the paper's abstract.
    """

    def __init__(self) -> None:
        from deepscholar.llm.local_judge import MODEL_ID

        self.model_id = MODEL_ID
        self.config_id = f"local:{MODEL_ID}:{LOCAL_VERSION}"

    def label_importance(self, query: QueryContext, refs: Sequence[ReferenceContext]) -> list[Judged[bool]]:
        from deepscholar.llm import local_judge

        refs = list(refs)
        if not refs:
            return []
        citing: dict[str, list[int]] = {}
        sentences = split_exemplar_sentences(query.section_text)
        clean = [strip_citation_markers(s) for s in sentences]
        for i, sentence in enumerate(sentences):
            for key in cited_keys(sentence):
                citing.setdefault(key, []).append(i)
        fallback = " ".join(query.abstract.split()) or query.title
        ref_texts = [". ".join(x for x in (r.title, r.snippet) if x and x.strip()) for r in refs]
        contexts = list(dict.fromkeys(
            [clean[i] for r in refs for i in citing.get(r.cite_key, [])] + [fallback]))
        embeddable = [t for t in dict.fromkeys(ref_texts) if t]
        sims = local_judge.similarity(embeddable, contexts) if embeddable else None
        row_of = {t: i for i, t in enumerate(embeddable)}
        col_of = {t: j for j, t in enumerate(contexts)}

        scored = []
        for idx, (ref, text) in enumerate(zip(refs, ref_texts, strict=True)):
            where = citing.get(ref.cite_key, [])
            ctx = [clean[i] for i in where] or [fallback]
            # A non-empty text is in `embeddable`, so `sims` is there.
            cosine = (max(float(sims[row_of[text], col_of[c]]) for c in ctx)
                      if text and sims is not None else 0.0)
            bonus = min(CITATION_BONUS_PER_SENTENCE * max(len(where) - 1, 0), CITATION_BONUS_MAX)
            # Rounded so float noise cannot reorder near-ties; ties go to the earlier-cited reference.
            score = round(cosine, 4) + bonus
            scored.append((score, where[0] if where else math.inf, idx, cosine, bonus, len(where), bool(text)))
        order = sorted(scored, key=lambda s: (-s[0], s[1], s[2]))
        n_important = max(1, round(len(refs) / 3))
        rank_of = {s[2]: r for r, s in enumerate(order, 1)}

        out = []
        for score, _, idx, cosine, bonus, n_citing, has_text in scored:
            rank = rank_of[idx]
            important = rank <= n_important
            evidence = (f"the {n_citing} exemplar sentence(s) citing it" if n_citing
                        else "the paper's abstract (no sentence cites it)")
            basis = (f"max cosine {cosine:.3f} between its title+snippet and {evidence}" if has_text
                     else "no title or snippet to compare, so cosine 0")
            out.append(Judged(important, None, 0, explanation=(
                f"local embedding judge ({self.model_id}), not an LLM reading: "
                f"{'important' if important else 'not important'} as rank {rank}/{len(refs)} "
                f"(top {n_important} kept) by score {score:.3f} = {basis} + bonus {bonus:.2f} "
                f"for being cited in {n_citing} sentence(s)")))
        return out

    def nuggetize(self, query: QueryContext) -> Judged[list[Nugget]]:
        from deepscholar.llm import local_judge

        candidates = [strip_citation_markers(s) for s in split_exemplar_sentences(query.section_text)]
        candidates = [s for s in candidates if len(s.split()) >= MIN_NUGGET_WORDS]
        if not candidates:
            return Judged(None, f"no sentence of at least {MIN_NUGGET_WORDS} words in the section", 0)
        vectors = local_judge.embed(candidates)
        kept: list[int] = []
        for i in range(len(candidates)):
            if not kept or float((vectors[kept] @ vectors[i]).max()) <= DUPLICATE_COSINE:
                kept.append(i)
        merged = len(candidates) - len(kept)
        if len(kept) > MAX_NUGGETS:
            # Evenly spaced rather than the first 30, so the end of a long section is still represented.
            step = (len(kept) - 1) / (MAX_NUGGETS - 1)
            kept = [kept[round(j * step)] for j in range(MAX_NUGGETS)]
        texts = [candidates[i] for i in kept]
        anchor = " ".join(query.abstract.split()) or query.title
        closeness = local_judge.similarity(texts, [anchor])[:, 0]
        n_vital = math.ceil(len(texts) / 2)
        ranked = sorted(range(len(texts)), key=lambda j: (-round(float(closeness[j]), 4), j))
        vital = set(ranked[:n_vital])
        nuggets = [Nugget(t, "vital" if j in vital else "okay") for j, t in enumerate(texts)]
        return Judged(nuggets, None, 0, explanation=(
            f"local embedding judge ({self.model_id}), not an LLM: {len(nuggets)} nuggets are the exemplar's "
            f"sentences of >= {MIN_NUGGET_WORDS} words with citation markers removed ({merged} near-duplicates "
            f"at cosine > {DUPLICATE_COSINE} merged, capped at {MAX_NUGGETS}); vital = the {n_vital} closest "
            f"to the {'abstract' if query.abstract.strip() else 'title'} by cosine"))


def make_release_judge(
    spec: str, engine: Engine | None, api_base: str | None = None, concurrency: int | None = None
) -> ReleaseJudge:
    """"local" is the offline judge; anything else is a litellm model string (e.g. "openai/gpt-4.1").

    `concurrency` (requests in flight) left None is DEEPSCHOLAR_RELEASE_JUDGE_CONCURRENCY (default 8).
    """
    spec = spec.strip()
    if spec == "local":
        return LocalReleaseJudge()
    if engine is None:
        raise ValueError("an LLM judge needs a database engine for its call cache")
    if concurrency is None:
        concurrency = current_settings().release_judge_concurrency
    return LLMReleaseJudge(LLMClient(engine, spec, api_base=api_base, concurrency=concurrency))
