"""The `local` search backend at a real corpus's size: the BM25 index against the old ts_rank_cd ranking.

A scratch warehouse (a throwaway database on the local PostgreSQL server when one answers, else the
embedded one; dropped afterwards) gets a synthetic corpus grown in steps to each size (default 30k, 100k,
300k and 1M papers; `load_seconds` is the time to generate and load a step's new papers). The papers are generated here from the demo snapshot's written material
(replay/demo_data: its themes' contexts, details, results and titles give the real English words; invented
method and dataset names add the long tail) with a Zipf-like word distribution and a few hundred topics,
so common words match a large share of the corpus as they do on arXiv; dates spread over eight years and
about 1% of the papers carry no date.

At each size: the index is built from scratch in a child process (timed, `build_seconds`; its peak
resident memory `build_peak_rss_mb`; its files' size `index_mb`), then 200
queries run through `make_search("local", ...)` — query-paper-like texts (a title and an abstract drawn
like the corpus's, with a date spread over the corpus's years so the cutoff matters; each excludes one
paper) — for p50/p95 latency in ms (warm: the first search, which loads the index, is not counted);
`overlap_at_10` is the mean share of the top 10 the old ranking (`local_tsrank`) also returns, measured on
`--overlap-queries` of the same queries (default 20, evenly spaced, stopping after `--overlap-seconds`
per size, default 480: the old ranking takes about a minute per query at 300k; `overlap_queries` says
how many were measured).
`check_ms` is one corpus fingerprint query (what a process pays every DEEPSCHOLAR_SEARCH_INDEX_CHECK_SECONDS).
`on_topic_at_10` is the share of the top 10 sharing a topic with the query paper (the generator knows
the topics: a ground truth of sorts), also given for both rankings over the overlap sample.
`peak_rss_mb` is this process's peak resident memory after the size's searches (it holds the generator's
and the loader's data too); `index_rss_mb` is its growth while loading and searching the index.

Prints one JSON line per size. Usage:
  .venv/bin/python bench/search.py [--sizes 30000,100000,300000,1000000] [--queries 200] [--overlap-queries 20]
                                   [--db-url URL]
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import re
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
from support.warehouse import throwaway_warehouse  # noqa: E402

START = datetime(2018, 1, 1, tzinfo=UTC)
SPAN_DAYS = 8 * 365
N_TOPICS = 400
TOPIC_WORDS = 300
_SYLLABLES = ("ka", "ro", "ne", "ti", "ma", "lu", "ser", "gra", "pho", "vec", "tor", "dal", "mi", "qu", "zen",
              "bri", "sto", "fle", "par", "nox", "ul", "tre", "vo", "lin", "cap", "dex", "or", "im", "sy", "bel")


def _real_words() -> list[str]:
    """The demo material's words, in a seeded order (the head of the Zipf distribution)."""
    from deepscholar.replay.demo_data import CANDIDATES, THEMES

    text: list[str] = []
    for theme in THEMES.values():
        text += [*theme.contexts, *theme.details, *theme.results, theme.name, theme.datasets]
        text += [" ".join(map(str, r)) for r in theme.refs]
    text += [c.title + " " + " ".join(c.abstract) for c in CANDIDATES]
    words = sorted({w for w in re.findall(r"[a-z]{3,}", " ".join(text).lower())})
    np.random.default_rng(7).shuffle(words)
    return words


def vocabulary(size: int = 60_000) -> list[str]:
    """Real words first, then invented ones (method, dataset and jargon names: the long tail)."""
    words = _real_words()
    rng = np.random.default_rng(11)
    seen = set(words)
    while len(words) < size:
        w = "".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 5))))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


class PaperGenerator:
    """Seeded titles and abstracts: each paper mixes a general Zipf draw with one or two topics' words."""

    def __init__(self, seed: int = 0) -> None:
        self.words = vocabulary()
        ranks = np.arange(1, len(self.words) + 1)
        p = 1.0 / ranks ** 1.05
        self.general = np.cumsum(p / p.sum())
        flat = p ** 0.3 / (p ** 0.3).sum()
        topic_rng = np.random.default_rng(12345)  # the same topics for the corpus and the queries
        self.topics = np.stack([topic_rng.choice(len(self.words), size=TOPIC_WORDS, replace=False, p=flat)
                                for _ in range(N_TOPICS)])
        self.rng = np.random.default_rng(seed)
        tp = 1.0 / np.arange(1, TOPIC_WORDS + 1) ** 0.9
        self.topic_cdf = np.cumsum(tp / tp.sum())

    def _draw(self, cdf: np.ndarray, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, self.rng.random(n)), len(cdf) - 1)

    def papers(self, n: int) -> list[tuple[str, str, frozenset[int]]]:
        """n (title, abstract, topics); words are drawn for the whole batch at once."""
        lengths = self.rng.integers(110, 220, size=n) + self.rng.integers(6, 13, size=n)
        total = int(lengths.sum())
        general = self._draw(self.general, total)
        topic_of = self.rng.integers(0, N_TOPICS, size=(n, 2))
        from_topic = self.rng.random(total) < 0.45
        second = self.rng.random(total) < 0.5
        paper_of = np.repeat(np.arange(n), lengths)
        topic = np.where(second, topic_of[paper_of, 1], topic_of[paper_of, 0])
        topical = self.topics[topic, self._draw(self.topic_cdf, total)]
        ids = np.where(from_topic, topical, general).tolist()
        cuts = np.cumsum(lengths).tolist()
        out, begin, words = [], 0, self.words
        for i, end in enumerate(cuts):
            doc = [words[j] for j in ids[begin:end]]
            n_title = 6 + int(lengths[i]) % 7
            title, body = doc[:n_title], doc[n_title:]
            sentences = [" ".join(body[s:s + 18]).capitalize() + "." for s in range(0, len(body), 18)]
            out.append((" ".join(title).capitalize(), " ".join(sentences), frozenset(topic_of[i].tolist())))
            begin = end
        return out

    def date(self) -> datetime:
        return START + timedelta(seconds=int(self.rng.integers(0, SPAN_DAYS * 86400)))


def load_corpus(engine, gen: PaperGenerator, start: int, stop: int, topics: dict[str, frozenset[int]]) -> None:
    """Papers start..stop-1 into `corpus` with COPY (the generated search_vector is computed by the server).

    The full-text GIN index is dropped for the COPY and built again afterwards: built in one go it costs
    a fraction of keeping it up to date row by row (the load took twice as long with it in place)."""
    with engine.begin() as conn:
        gin = conn.exec_driver_sql("SELECT indexdef FROM pg_indexes WHERE tablename = 'corpus' "
                                   "AND indexname = 'corpus_search_idx'").scalar()
        if gin:
            conn.exec_driver_sql("DROP INDEX corpus_search_idx")
    buf = io.StringIO()
    for i, (title, abstract, paper_topics) in zip(range(start, stop), gen.papers(stop - start), strict=True):
        topics[f"{9000 + i // 100000:04d}.{i % 100000:05d}"] = paper_topics
        published = "\\N" if gen.rng.random() < 0.01 else gen.date().isoformat()
        buf.write(f"{9000 + i // 100000:04d}.{i % 100000:05d}\t{title}\t{abstract}\t{published}\tbench\n")
    buf.seek(0)
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cur:
            cur.copy_expert("COPY corpus (arxiv_id, title, abstract, published, source) FROM STDIN", buf)
        raw.commit()
    finally:
        raw.close()
    if gin:
        with engine.begin() as conn:
            conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '512MB'")
            conn.exec_driver_sql(gin)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE corpus")


def queries(gen: PaperGenerator, n: int) -> list[tuple[str, datetime, str, frozenset[int]]]:
    """(text, cutoff, excluded id): a query paper's title and abstract, dated across the corpus's years."""
    out = []
    for i, (title, abstract, topics) in enumerate(gen.papers(n)):
        cutoff = START + timedelta(days=200 + (SPAN_DAYS - 200) * (i + 0.5) / n)
        out.append((f"{title}. {abstract}", cutoff, f"9000.{i * 37 % 30000:05d}", topics))
    return out


class _Scope:
    def __init__(self, arxiv_id: str, cutoff: datetime) -> None:
        self.arxiv_id, self.cutoff = arxiv_id, cutoff


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _on_topic(ids: list[str], query_topics: frozenset[int], topics: dict[str, frozenset[int]]) -> float | None:
    """Share of the results sharing a topic with the query (the generator's ground truth)."""
    return sum(bool(topics[i] & query_topics) for i in ids) / len(ids) if ids else None


def _build(url: str, index_dir: str, out) -> None:
    from deepscholar import db
    from deepscholar.search import bm25_index

    bm25_index.ensure_index(db.get_engine(url), Path(index_dir))
    with open("/proc/self/status") as f:  # this process image's high-water mark (not the parent's at fork)
        out.send(next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")))


def measure(engine, size: int, qs: list, topics: dict[str, frozenset[int]], overlap_n: int,
            overlap_seconds: float, index_dir: Path) -> dict:
    from deepscholar.search import bm25_index, make_search

    with engine.connect() as conn:
        t0 = time.perf_counter()
        bm25_index.corpus_fingerprint(conn)
        check_ms = (time.perf_counter() - t0) * 1000
    bm25_index.forget_loaded()
    shutil.rmtree(index_dir, ignore_errors=True)
    # Built in a child process, as a task would, so its peak memory is the build's alone.
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    child = ctx.Process(target=_build, args=(engine.url.render_as_string(hide_password=False), str(index_dir),
                                             send))
    child.start()
    build_rss = receive.recv()
    child.join()
    build_seconds = time.perf_counter() - t0
    if child.exitcode != 0:
        raise RuntimeError(f"index build failed ({child.exitcode})")
    rss_before = _current_rss_mb()
    index = bm25_index.ensure_index(engine, index_dir)  # loads what the child built
    latencies, results, on_topic = [], [], []
    for i, (text, cutoff, excluded, query_topics) in enumerate(qs):
        search = make_search("local", engine, _Scope(excluded, cutoff), index_dir=index_dir)
        t = time.perf_counter()
        hits = search.search(text, k=10)
        if i:  # the first search loads the index into this process
            latencies.append((time.perf_counter() - t) * 1000)
        assert all(h.published is not None and h.published < cutoff and h.arxiv_id != excluded for h in hits)
        results.append([h.arxiv_id for h in hits])
        on_topic.append(_on_topic(results[-1], query_topics, topics))
    index_rss = _current_rss_mb() - rss_before
    overlaps, old_ms, old_on_topic, new_on_topic = [], [], [], []
    step = max(1, len(qs) // max(1, overlap_n))
    started = time.perf_counter()
    for i in range(0, len(qs), step)[:overlap_n]:
        if time.perf_counter() - started > overlap_seconds:
            break
        text, cutoff, excluded, query_topics = qs[i]
        t = time.perf_counter()
        old = make_search("local_tsrank", engine, _Scope(excluded, cutoff)).search(text, k=10)
        old_ms.append((time.perf_counter() - t) * 1000)
        if old:
            overlaps.append(len({h.arxiv_id for h in old} & set(results[i])) / len(old))
            old_on_topic.append(_on_topic([h.arxiv_id for h in old], query_topics, topics))
            new_on_topic.append(on_topic[i])
    latencies.sort()

    def mean(values: list) -> float | None:
        values = [v for v in values if v is not None]
        return round(statistics.mean(values), 3) if values else None

    return {
        "corpus": size, "indexed_papers": index.n_docs, "vocabulary": index.n_terms,
        "build_seconds": round(build_seconds, 1), "index_mb": round(_dir_mb(index_dir), 1),
        "queries": len(qs), "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
        "check_ms": round(check_ms, 1), "build_peak_rss_mb": round(build_rss), "peak_rss_mb": round(_rss_mb()),
        "index_rss_mb": round(index_rss),
        "on_topic_at_10": mean(on_topic),
        "overlap_at_10": mean(overlaps), "overlap_queries": len(overlaps),
        "overlap_sample_on_topic_at_10": {"local": mean(new_on_topic), "local_tsrank": mean(old_on_topic)},
        "tsrank_p50_ms": round(statistics.median(old_ms), 1) if old_ms else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="30000,100000,300000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--overlap-queries", type=int, default=20)
    ap.add_argument("--overlap-seconds", type=float, default=480,
                    help="stop the old ranking's sample after this long per size (the count is printed)")
    ap.add_argument("--db-url", default="auto", help="'auto' (local server, else embedded) or a PostgreSQL URL")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still drops the scratch database
    sizes = sorted(int(s) for s in args.sizes.split(","))
    gen = PaperGenerator()
    qs = queries(PaperGenerator(seed=1), args.queries)
    index_dir = Path(tempfile.mkdtemp(prefix="deepscholar_search_index_"))
    try:
        with throwaway_warehouse("deepscholar_bench_search_", database=args.db_url) as (engine, _home):
            loaded = 0
            topics: dict[str, frozenset[int]] = {}
            for size in sizes:
                started = time.perf_counter()
                load_corpus(engine, gen, loaded, size, topics)
                load_seconds = time.perf_counter() - started
                loaded = size
                print(json.dumps({**measure(engine, size, qs, topics, args.overlap_queries, args.overlap_seconds,
                                            index_dir), "load_seconds": round(load_seconds, 1)}), flush=True)
    finally:
        shutil.rmtree(index_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
