"""The no-LLM baseline: search, rank by embedding similarity, and cite the sources' own sentences.

Everything it writes is a sentence taken verbatim from a cited source's abstract (a connective word
may precede it), so every claim is supported by its citation by construction; what it lacks is
synthesis. It runs offline (MiniLM from the local judge) and is deterministic: search results are
pure functions of the corpus, similarities are rounded before they order anything, and ties break
on arXiv id.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepscholar.clock import assume_utc
from deepscholar.errors import SystemFailure
from deepscholar.search.base import SearchResult, SearchTool
from deepscholar.systems import config_schema as cs
from deepscholar.systems.base import (
    Query,
    Report,
    Source,
    System,
    register_system,
)

__all__ = ["ExtractiveSystem", "DEFAULTS", "build_search_queries", "cluster_themes", "n_themes"]

DEFAULTS: dict[str, Any] = {
    "search_k": 20,            # results per search query
    "top_k": 12,               # sources kept after ranking (K)
    "max_queries": 4,          # title + up to two key phrases + top TF-IDF terms
    "tfidf_terms": 5,          # words in the TF-IDF query
    "min_similarity": 0.2,     # below this cosine a source is off-topic and dropped ...
    "min_sources": 3,          # ... unless fewer than this many would remain
    "min_themes": 2,
    "max_themes": 4,
    "sources_per_theme": 4,    # themes = sources / this, clamped to [min_themes, max_themes]
    "min_sentence_words": 6,   # shorter abstract sentences are rarely a claim worth citing
    "headings": True,          # a short markdown heading per theme
}

GENERIC_WEIGHT = 0.5  # how much a sentence's closeness to another source's sentence counts against it

# Connectives between consecutive sentences of one theme, cycled in order (deterministic, light).
CONNECTIVES = ("Similarly, ", "Relatedly, ", "In the same vein, ", "Along these lines, ")

# English function words plus the filler verbs and nouns of abstracts: none makes a useful search term.
STOPWORDS = frozenset("""
a about above across after again against all almost also although always am among an and another any
are around as at be because been before being below between both but by can cannot could did do does
doing done down during each either else etc even ever every few for from further had has have having
he her here hers him his how however i if in into is it its itself just least less like made make
makes many may me might more most much must my neither no nor not now of off often on once one only
onto or other others our ours out over own per perhaps rather same several she should since so some
such than that the their theirs them themselves then there thereby therefore these they this those
though through thus to too toward towards under until up upon us use used uses using very via was we
well were what when where whether which while who whom whose why will with within without would yet
you your
achieve achieves allow allows approach approaches art based better consistent consistently demonstrate
demonstrates enable enables existing experiment experiments extensive find findings first furthermore
improve improved improves including introduce introduces key lead leads method methods moreover new
novel outperform outperforms paper present presents previous prior problem propose proposed proposes
provide provides recent recently reduce reduces remain remains require requires result results second
show shows significant significantly state strong study task tasks three two various work works yield
yields
""".split())

_LATEX_RE = re.compile(r"\$[^$]*\$|\\[A-Za-z]+\*?(?:\{[^{}]*\})?")
_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")
_BREAK_RE = re.compile(r"[.,;:!?()\[\]{}\"“”]|\s-\s")
# A coined system name ("EviRAG", "FreshJudge"): the paper's own, so no earlier paper will contain it.
_COINED_RE = re.compile(r"[A-Za-z][a-z]+[A-Z][A-Za-z0-9]*")


def _clean(text: str) -> str:
    return " ".join(_LATEX_RE.sub(" ", text or "").split())


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN_RE.findall(_clean(text))]


def _coined(text: str) -> set[str]:
    return {t.lower() for t in _TOKEN_RE.findall(_clean(text)) if _COINED_RE.fullmatch(t)}


def _is_content(tok: str, skip: Collection[str] = frozenset()) -> bool:
    return len(tok) > 2 and tok not in STOPWORDS and tok not in skip


def _phrases(text: str, min_len: int = 2, max_len: int = 3,
             skip: Collection[str] = frozenset()) -> list[tuple[str, ...]]:
    """Candidate key phrases: windows of content words between stop words and punctuation."""
    out: list[tuple[str, ...]] = []
    for chunk in _BREAK_RE.split(_clean(text)):
        run: list[str] = []
        for tok in [*_tokens(chunk), ""]:
            if tok and _is_content(tok, skip):
                run.append(tok)
                continue
            for n in range(min_len, max_len + 1):
                out.extend(tuple(run[i:i + n]) for i in range(len(run) - n + 1))
            run = []
    return out


def build_search_queries(title: str, abstract: str, background: list[str], *, max_queries: int = 4,
                         tfidf_terms: int = 5) -> tuple[list[str], dict[str, float]]:
    """The title, then the abstract's top key phrases and top TF-IDF words.

    Document frequencies come from `background` (what the title search found): words the whole topic
    shares rank low, so the later queries reach the paper's specific aspects the title search missed.
    The paper's own coined names are skipped: no earlier paper contains them.
    """
    skip = _coined(f"{title} {abstract}")
    tf = Counter(t for t in _tokens(abstract) + _tokens(title) if _is_content(t, skip))
    docs = [set(_tokens(b)) for b in background]
    n = len(docs)
    weight = {w: c * (math.log((n + 1) / (1 + sum(w in d for d in docs))) + 1) for w, c in tf.items()}
    queries = [_clean(title)]
    phrase_counts = Counter(_phrases(f"{title}. {abstract}", skip=skip))
    ranked = sorted(phrase_counts, key=lambda p: (-round(phrase_counts[p] * sum(weight.get(w, 0) for w in p), 6),
                                                  " ".join(p)))
    used: set[str] = set()
    for phrase in ranked:
        if len(queries) >= max_queries - 1:
            break
        if used & set(phrase):
            continue
        queries.append(" ".join(phrase))
        used |= set(phrase)
    top_words = sorted(weight, key=lambda w: (-round(weight[w], 6), w))[:tfidf_terms]
    if top_words:
        queries.append(" ".join(top_words))
    queries = [q for q in dict.fromkeys(queries) if q][:max(1, max_queries)]
    return queries, {w: round(v, 4) for w, v in sorted(weight.items(), key=lambda x: (-x[1], x[0]))[:20]}


def n_themes(n_sources: int, *, min_themes: int = 2, max_themes: int = 4, sources_per_theme: int = 4) -> int:
    target = round(n_sources / max(1, sources_per_theme))
    return max(1, min(n_sources, max(min_themes, min(max_themes, target))))


def cluster_themes(vectors: np.ndarray, k: int) -> list[list[int]]:
    """Ward agglomerative clustering down to k groups; ties go to the lowest index pair.

    Ward's merge cost grows with group size, so themes come out balanced where average linkage on
    close-knit abstracts leaves one big group and outliers. Groups list row indexes in ascending order.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    groups = [[i] for i in range(len(vectors))]
    while len(groups) > max(1, k):
        best, pair = math.inf, (0, 1)
        centroids = [vectors[g].mean(axis=0) for g in groups]
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                na, nb = len(groups[a]), len(groups[b])
                cost = round(na * nb / (na + nb) * float(np.sum((centroids[a] - centroids[b]) ** 2)), 6)
                if cost < best:
                    best, pair = cost, (a, b)
        a, b = pair
        groups[a] = sorted(groups[a] + groups[b])
        del groups[b]
    return groups


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def theme_headings(themes_titles: list[list[str]]) -> list[str]:
    """A short heading per theme: a multi-word title phrase its members share, else its first title's.

    Phrases count once per title with plurals folded ("networks" = "network"); the most shared wins,
    then the longer, then the one fewer other themes use. No heading repeats (or truncates) another.
    """
    def title_phrases(title: str, min_len: int) -> dict[tuple[str, ...], tuple[str, ...]]:
        return {tuple(_singular(w) for w in p): p for p in _phrases(title, min_len=min_len, max_len=3)}

    per_theme = [[title_phrases(t, 2) for t in titles] for titles in themes_titles]
    counts = [Counter(k for ph in theme for k in ph) for theme in per_theme]
    used: list[set[str]] = []

    def taken(k: tuple[str, ...]) -> bool:
        return any(set(k) <= u for u in used)

    headings = []
    for n, (theme, titles) in enumerate(zip(per_theme, themes_titles, strict=True)):
        surface = {k: v for ph in reversed(theme) for k, v in ph.items()}
        other = Counter(k for m, c in enumerate(counts) if m != n for k in c.elements())
        shared = [k for k, c in counts[n].items() if c >= 2 and not taken(k)]
        if shared:
            best = min(shared, key=lambda k: (-counts[n][k], -len(k), other[k], " ".join(k)))
            words = " ".join(surface[best])
        else:
            # The first title's longest phrase, whole words of up to three; a one-word title is itself.
            first = {**title_phrases(titles[0], 1), **theme[0]} if titles else {}
            options = [k for k in first if not taken(k)] or list(first)
            best = min(options, key=lambda k: (-len(k), " ".join(k))) if options else ()
            words = " ".join(first[best]) if options else "Related work"
        used.append(set(best))
        headings.append(words[:1].upper() + words[1:])
    return headings


def _pick_sentence(sentences: list[str], score: np.ndarray, used: set[str], min_words: int) -> str:
    """The best-scoring sentence not already cited for another source, long enough to carry a claim."""
    def rank(i: int) -> tuple:
        key = " ".join(sentences[i].lower().split())
        return (key in used, len(sentences[i].split()) < min_words, -round(float(score[i]), 4), i)

    best = min(range(len(sentences)), key=rank)
    used.add(" ".join(sentences[best].lower().split()))
    return sentences[best]


def _cite(sentence: str, idx: int, connective: str) -> str:
    body = sentence.strip().rstrip(".!?;: ")
    if connective:
        first = body.split(" ", 1)[0]
        # "We propose" reads on as "we propose"; acronyms and names ("BERT", "GraphSAGE") keep their case.
        if first.replace("-", "").isalpha() and first[1:].islower() and first != "I":
            body = body[:1].lower() + body[1:]
    return f"{connective}{body} [{idx}]."


@register_system("extractive")
class ExtractiveSystem(System):
    """Title/phrase/TF-IDF searches → MiniLM ranking → themes → one cited source sentence per source."""

    uses_search = True
    uses_model_knowledge = False  # no model writes its text: no knowledge cutoff applies
    version = "2"  # bump rule: systems/base.py System.version; 2: `local` search ranks with BM25
    defaults = DEFAULTS
    config_schema = {**{k: cs.flag if isinstance(v, bool) else cs.fraction if isinstance(v, float) else cs.positive_int
                        for k, v in DEFAULTS.items()}, "search": cs.text}

    @classmethod
    def models(cls, config: Mapping[str, Any]) -> tuple[str, ...]:
        from deepscholar.llm.local_judge import MODEL_ID

        return (MODEL_ID,)  # embeddings only; no LLM

    def _cfg(self, key: str):
        value = self.config.get(key, DEFAULTS[key])
        if isinstance(DEFAULTS[key], bool) and isinstance(value, str):  # "false" from a CLI flag is False
            return value.strip().lower() in {"1", "true", "yes", "on"}
        return type(DEFAULTS[key])(value)

    def generate(self, query: Query, search: SearchTool) -> Report:
        if search is None:
            raise SystemFailure("extractive needs a search tool")
        timings: dict[str, float] = {}
        started = time.perf_counter()
        found = self._search(query, search)
        timings["search_ms"] = (time.perf_counter() - started) * 1000
        t0 = time.perf_counter()
        ranked = self._rank(query, found.pool)
        timings["rank_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        themes = self._themes(ranked)
        picked = self._pick_sentences(ranked, themes, found.pool)
        timings["compose_ms"] = (time.perf_counter() - t0) * 1000
        text, sources, theme_idx = self._compose(ranked, themes, picked, found.pool)
        timings["total_ms"] = (time.perf_counter() - started) * 1000
        trace = {
            "search_backend": getattr(search, "name", None),
            "queries": found.per_query,
            "term_weights": found.weights,
            "n_candidates": len(found.pool),
            "dropped": found.dropped,
            "selected": [{"idx": n, "arxiv_id": found.pool[ranked.keys[i]].arxiv_id,
                          "similarity": float(ranked.sims[i])}
                         for n, i in enumerate((i for m in themes for i in m), 1)],
            "themes": theme_idx,
            "config": {key: self._cfg(key) for key in DEFAULTS},
            "timings_ms": {name: round(v, 1) for name, v in timings.items()},
        }
        return Report(text=text, sources=sources, trace=trace)

    def _search(self, query: Query, search: SearchTool) -> _Found:
        """1. Search: the title first, whose results are the background for the other queries' weights."""
        found = _Found(query, search, self._cfg("search_k"))
        title_hits = found.run(_clean(query.title))
        queries, found.weights = build_search_queries(query.title, query.abstract,
                                                      [f"{r.title} {r.abstract}" for r in title_hits],
                                                      max_queries=self._cfg("max_queries"),
                                                      tfidf_terms=self._cfg("tfidf_terms"))
        for text in queries[1:]:
            found.run(text)
        if not found.pool:
            raise SystemFailure("search found no paper published before the cutoff")
        return found

    def _rank(self, query: Query, pool: dict[str, SearchResult]) -> _Ranked:
        """2. Rank the union by cosine to title+abstract; keep K above the relevance floor."""
        from deepscholar.llm import local_judge
        from deepscholar.text.sentences import split_exemplar_sentences

        keys = sorted(key for key in pool if split_exemplar_sentences(" ".join(pool[key].abstract.split())))
        if not keys:
            raise SystemFailure("no search result before the cutoff has an abstract to cite from")
        query_text = f"{query.title}. {' '.join(query.abstract.split())}"
        doc_texts = [f"{pool[key].title}. {' '.join(pool[key].abstract.split())}" for key in keys]
        vecs = local_judge.embed([query_text, *doc_texts])
        qvec, dvecs = vecs[0], vecs[1:]
        sims = np.round(dvecs @ qvec, 4)
        order = sorted(range(len(keys)), key=lambda i: (-float(sims[i]), keys[i]))
        floor, top_k = self._cfg("min_similarity"), self._cfg("top_k")
        chosen = [i for i in order if sims[i] >= floor][:top_k]
        if len(chosen) < min(self._cfg("min_sources"), top_k):
            chosen = order[:min(self._cfg("min_sources"), top_k)]
        return _Ranked(keys=keys, qvec=qvec, dvecs=dvecs, sims=sims, chosen=chosen,
                       rank_of={i: r for r, i in enumerate(chosen)})

    def _themes(self, ranked: _Ranked) -> list[list[int]]:
        """3. Themes, ordered by their best member; members by similarity to the query."""
        chosen, rank_of = ranked.chosen, ranked.rank_of
        k_themes = n_themes(len(chosen), min_themes=self._cfg("min_themes"), max_themes=self._cfg("max_themes"),
                            sources_per_theme=self._cfg("sources_per_theme"))
        groups = cluster_themes(ranked.dvecs[chosen], k_themes)
        themes = [sorted((chosen[j] for j in g), key=lambda i: rank_of[i]) for g in groups]
        themes.sort(key=lambda members: rank_of[members[0]])
        return themes

    def _pick_sentences(self, ranked: _Ranked, themes: list[list[int]],
                        pool: dict[str, SearchResult]) -> dict[int, str]:
        """4. Per source, the abstract sentence closest to the query and to the source's own title: what
        the source itself contributes that bears on the query. No sentence is cited twice."""
        from deepscholar.llm import local_judge
        from deepscholar.text.sentences import split_exemplar_sentences

        chosen, keys = ranked.chosen, ranked.keys
        sentences = {i: split_exemplar_sentences(" ".join(pool[keys[i]].abstract.split())) for i in chosen}
        flat = [s for i in chosen for s in sentences[i]]
        sent_vecs = local_judge.embed(flat)
        title_vecs = local_judge.embed([pool[keys[i]].title for i in chosen])
        offsets, start = {}, 0
        for i in chosen:
            offsets[i] = (start, start + len(sentences[i]))
            start += len(sentences[i])
        generic = _genericness(sent_vecs, [len(sentences[i]) for i in chosen], len(flat))
        used: set[str] = set()
        picked = {}
        for i in (i for members in themes for i in members):
            lo, hi = offsets[i]
            score = (sent_vecs[lo:hi] @ ranked.qvec + sent_vecs[lo:hi] @ title_vecs[ranked.rank_of[i]]
                     - GENERIC_WEIGHT * generic[lo:hi])
            picked[i] = _pick_sentence(sentences[i], score, used, self._cfg("min_sentence_words"))
        return picked

    def _compose(self, ranked: _Ranked, themes: list[list[int]], picked: dict[int, str],
                 pool: dict[str, SearchResult]) -> tuple[str, list[Source], list[list[int]]]:
        """The text (a paragraph per theme, under a heading), its sources and each theme's source numbers."""
        sources: list[Source] = []
        blocks: list[str] = []
        theme_idx: list[list[int]] = []
        headings = theme_headings([[pool[ranked.keys[i]].title for i in members] for members in themes])
        for members, heading in zip(themes, headings, strict=True):
            lines = []
            theme_idx.append(list(range(len(sources) + 1, len(sources) + len(members) + 1)))
            for pos, i in enumerate(members):
                r = pool[ranked.keys[i]]
                # The snippet is the abstract exactly as split into sentences, so each cited sentence
                # is a verbatim substring of its source's snippet.
                sources.append(Source(idx=len(sources) + 1, title=r.title, snippet=" ".join(r.abstract.split()),
                                      arxiv_id=r.arxiv_id, url=r.url, published=r.published))
                connective = CONNECTIVES[(pos - 1) % len(CONNECTIVES)] if pos else ""
                lines.append(_cite(picked[i], len(sources), connective))
            if self._cfg("headings"):
                blocks.append(f"### {heading}")
            blocks.append(" ".join(lines))
        return "\n\n".join(blocks) + "\n", sources, theme_idx


class _Found:
    """What the searches found before the cutoff, by arXiv id (else title), and what they dropped."""

    def __init__(self, query: Query, search: SearchTool, k: int) -> None:
        self.query, self.search, self.k = query, search, k
        self.pool: dict[str, SearchResult] = {}
        self.dropped = {"after_cutoff_or_undated": 0, "query_paper": 0}
        self.per_query: list[dict[str, Any]] = []
        self.weights: dict[str, float] = {}

    def run(self, text: str) -> list[SearchResult]:
        found = self.search.search(text, self.k)
        fresh = 0
        for r in found:
            key = r.arxiv_id or f"title:{' '.join(r.title.lower().split())}"
            if r.arxiv_id and r.arxiv_id == self.query.arxiv_id:
                self.dropped["query_paper"] += 1
            elif r.published is None or assume_utc(r.published) >= assume_utc(self.query.cutoff):
                self.dropped["after_cutoff_or_undated"] += 1  # the tool should never return these
            elif key not in self.pool:
                self.pool[key] = r
                fresh += 1
        self.per_query.append({"query": text, "n": len(found), "new": fresh})
        return found


@dataclass
class _Ranked:
    """The pool's keys (sorted), their embeddings and similarities, and the sources chosen (by rank)."""

    keys: list[str]
    qvec: np.ndarray
    dvecs: np.ndarray
    sims: np.ndarray
    chosen: list[int]
    rank_of: dict[int, int]


def _genericness(sent_vecs: np.ndarray, counts: list[int], n: int) -> np.ndarray:
    """Boilerplate ("Experiments on ... show ...") recurs across abstracts: each sentence's closeness to
    the nearest sentence of another source, by which it is discounted."""
    cross = sent_vecs @ sent_vecs.T
    owner = np.repeat(np.arange(len(counts)), counts)
    cross[owner[:, None] == owner[None, :]] = 0.0
    return cross.max(axis=1) if n else np.zeros(0)
