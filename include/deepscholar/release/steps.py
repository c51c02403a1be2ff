"""The monthly release pipeline, one function per step.

Each step reads what earlier steps stored, does only the work that is still missing, and writes with
idempotent upserts, so re-running a month (or retrying one Airflow task) changes nothing. A paper that
fails is recorded in `release_candidates` with its reason and never stops the month; a service that is
down (InfrastructureError, e.g. a host whose circuit breaker opened) stops the step instead, keeping what
was stored, so the Airflow retry carries on from there.
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db, rate_limit
from deepscholar.config import ReleaseConfig
from deepscholar.errors import InfrastructureError
from deepscholar.progress import Progress
from deepscholar.release.window import month_window

log = logging.getLogger("deepscholar.release")

# Stages a candidate passes through, in order; a skipped candidate keeps the stage that dropped it.
STAGES = ("search", "version", "venue", "source", "section", "bibliography", "kept")


@dataclass(frozen=True)
class ReleaseContext:
    """Everything a step needs: where the data lives and the stored spec of the release."""

    engine: Engine
    release_id: str
    config: ReleaseConfig

    @classmethod
    def load(cls, engine: Engine, release_id: str, runtime: ReleaseConfig | None = None) -> ReleaseContext:
        """The stored spec plus the endpoints of `runtime` (default: this process's environment)."""
        with engine.connect() as conn:
            stored = conn.execute(
                sa.text("SELECT config FROM releases WHERE release_id = :r"), {"r": release_id}
            ).scalar()
        if stored is None:
            raise LookupError(f"release {release_id} has not been opened (run the open step first)")
        # The stored spec decides what the release contains; endpoints come from this run's environment.
        config = ReleaseConfig.from_dict(stored).with_runtime_endpoints(runtime or ReleaseConfig.from_env())
        # Every process working on the month paces its requests through the warehouse (rate_limit).
        rate_limit.use_warehouse(engine)
        return cls(engine, release_id, config)


def code_version() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def open_release(engine: Engine, release_id: str, config: ReleaseConfig) -> ReleaseContext:
    """Create or refresh the release row. A published release keeps its status and config."""
    start, end = month_window(release_id)
    db.init_db(engine)
    with engine.begin() as conn:
        status = conn.execute(
            sa.text("SELECT status FROM releases WHERE release_id = :r"), {"r": release_id}
        ).scalar()
        if status == "published":
            log.info("release %s is already published; re-running only fills what is missing", release_id)
        else:
            if status == "failed":
                # A re-build after a failed gate: the sources may have been fixed since, so references
                # that found nothing are looked up again (a plain task retry keeps them).
                retried = conn.execute(sa.text(
                    "UPDATE exemplar_references SET resolution_method = NULL, resolution_error = NULL "
                    "WHERE release_id = :r AND resolution_method = 'unresolved'"), {"r": release_id}).rowcount
                log.info("release %s failed before: re-building, %d unresolved references will be looked up "
                         "again", release_id, retried)
            db.upsert(conn, "releases", [{
                "release_id": release_id, "source": "pipeline", "window_start": start, "window_end": end,
                "config": config.to_dict(), "status": "building", "code_version": code_version(), "error": None,
            }], key=["release_id"])
    return ReleaseContext.load(engine, release_id, runtime=config)


_CANDIDATE_DEFAULTS = {"reason": None, "detail": None}


def _set_candidates(conn: sa.Connection, release_id: str, rows: list[dict]) -> None:
    """Record candidate outcomes; venue columns are written only by the filter step that finds them."""
    for venue_known in (True, False):
        batch = [{"release_id": release_id, **_CANDIDATE_DEFAULTS, **r} for r in rows
                 if ("venue" in r) == venue_known]
        db.upsert(conn, "release_candidates", batch, key=["release_id", "arxiv_id"])


def _candidates(conn: sa.Connection, release_id: str, stage: str, statuses=("pending", "error")) -> list[dict]:
    """Candidates at `stage`, in the month's sample order (release/sampling.py), then by id."""
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT c.*, p.comment, p.journal_ref, p.title, p.abstract, p.authors, p.published, p.primary_category "
        "FROM release_candidates c JOIN papers p USING (arxiv_id, version) "
        "WHERE c.release_id = :r AND c.stage = :s AND c.status = ANY(:st) "
        "ORDER BY c.sample_rank NULLS LAST, c.arxiv_id"),
        {"r": release_id, "s": stage, "st": list(statuses)}).mappings()]


# --- 1. search -------------------------------------------------------------------------------------------

def search_candidates(ctx: ReleaseContext) -> dict:
    """Every paper the month's category search returns is stored, whatever happens to it later."""
    from deepscholar.sources.arxiv import ArxivSource

    cfg = ctx.config
    start, end = month_window(ctx.release_id)
    source = ArxivSource(api_url=cfg.arxiv_api_url, delay_seconds=cfg.arxiv_delay_seconds)
    papers = list(source.search_window(cfg.categories, start, end))
    log.info("search: %d papers in %s for %s", len(papers), ctx.release_id, ", ".join(cfg.categories))
    with ctx.engine.begin() as conn:
        db.upsert(conn, "papers", [_paper_row(p) for p in papers], key=["arxiv_id", "version"])
        db.upsert(conn, "corpus", [_corpus_row(p, "search") for p in papers], key=["arxiv_id"], update=[])
        # A candidate already past the search stage keeps its state: re-runs do not reset it.
        db.upsert(conn, "release_candidates", [
            {"release_id": ctx.release_id, "arxiv_id": p.arxiv_id, "version": p.version,
             "stage": "search", "status": "pending"} for p in papers
        ], key=["release_id", "arxiv_id"], update=[])
    return {"papers_seen": len(papers)}


def _paper_row(p) -> dict:
    return {"arxiv_id": p.arxiv_id, "version": p.version, "title": p.title, "abstract": p.abstract,
            "authors": list(p.authors), "categories": list(p.categories), "primary_category": p.primary_category,
            "published": p.published, "updated": p.updated, "comment": p.comment, "journal_ref": p.journal_ref,
            "doi": p.doi}


def _corpus_row(p, source: str) -> dict:
    return {"arxiv_id": p.arxiv_id, "title": p.title, "abstract": p.abstract, "authors": list(p.authors),
            "published": p.published, "categories": list(p.categories), "doi": p.doi, "source": source}


# --- 2. filters ------------------------------------------------------------------------------------------

def filter_candidates(ctx: ReleaseContext) -> dict:
    """Keep v1 papers accepted or published at a venue; record the matched venue and phrase."""
    from deepscholar.sources.venues import DEFAULT_VENUES, detect_venue

    venues = ctx.config.venues or DEFAULT_VENUES
    counts = {"not_v1": 0, "no_venue": 0, "passed": 0}
    with ctx.engine.begin() as conn:
        rows = []
        for c in _candidates(conn, ctx.release_id, "search"):
            if c["version"] != 1:
                rows.append({"arxiv_id": c["arxiv_id"], "version": c["version"], "stage": "version",
                             "status": "skipped", "reason": "not_v1",
                             "detail": f"latest version is v{c['version']}"})
                counts["not_v1"] += 1
                continue
            match = detect_venue(c["comment"], c["journal_ref"], venues)
            if match is None and ctx.config.require_venue:
                rows.append({"arxiv_id": c["arxiv_id"], "version": 1, "stage": "venue", "status": "skipped",
                             "reason": "no_venue", "detail": f"comment={c['comment']!r} journal_ref={c['journal_ref']!r}",
                             "venue": None, "venue_phrase": None, "venue_field": None})
                counts["no_venue"] += 1
                continue
            rows.append({"arxiv_id": c["arxiv_id"], "version": 1, "stage": "source", "status": "pending",
                         "reason": None, "detail": None,
                         "venue": match.venue if match else None, "venue_phrase": match.phrase if match else None,
                         "venue_field": match.field if match else None})
            counts["passed"] += 1
        _set_candidates(conn, ctx.release_id, rows)
        _rank_for_sampling(conn, ctx)
    log.info("filters: %s", counts)
    return counts


# Candidates past the metadata filters, whatever happened to them since (they keep their rank).
_PASSED_FILTERS = "c.stage NOT IN ('search', 'version', 'venue')"


def _rank_for_sampling(conn: sa.Connection, ctx: ReleaseContext) -> None:
    """Give every candidate that passed the filters its place in the month's sample order."""
    from deepscholar.release.sampling import sample_order

    passed = conn.execute(sa.text(
        f"SELECT c.arxiv_id, p.primary_category FROM release_candidates c JOIN papers p USING (arxiv_id, version) "
        f"WHERE c.release_id = :r AND {_PASSED_FILTERS}"), {"r": ctx.release_id}).all()
    order = sample_order([(a, cat) for a, cat in passed], ctx.config.sample_seed, ctx.release_id)
    if order:
        conn.execute(sa.text(
            "UPDATE release_candidates c SET sample_rank = o.rank FROM unnest(CAST(:ids AS text[])) "
            "WITH ORDINALITY AS o(arxiv_id, rank) WHERE c.release_id = :r AND c.arxiv_id = o.arxiv_id"),
            {"r": ctx.release_id, "ids": order})


# --- 3-5. source, section, bibliography -----------------------------------------------------------------

class SkipPaper(Exception):
    """A paper that cannot become a query, with the stage and machine-readable reason."""

    def __init__(self, stage: str, reason: str, detail: str):
        super().__init__(detail)
        self.stage, self.reason, self.detail = stage, reason, detail


Shard = tuple[int, int]  # (k, n): the k-th of n slices of a step's work, k from 0
DEFAULT_RELEASE_SHARDS = 4


def release_shards() -> int:
    """How many slices extraction and resolution run as (DEEPSCHOLAR_RELEASE_SHARDS)."""
    from deepscholar.http_guard import env_number

    return int(env_number("DEEPSCHOLAR_RELEASE_SHARDS", DEFAULT_RELEASE_SHARDS, cast=int))


def shard_of(row: dict, n: int) -> int:
    """A candidate's or reference's slice, stable however much of the month is already done: by sample
    rank (consecutive ranks in different slices, so slices advance through the sample side by side),
    else by a hash of the paper's arXiv id."""
    rank = row.get("sample_rank")
    return (rank if rank is not None else zlib.crc32(row["arxiv_id"].encode())) % n


def shard_label(shard: Shard | None) -> str:
    """How logs and the UI name a slice: "slice 2 of 4" ("" for the whole month)."""
    return f"slice {shard[0] + 1} of {shard[1]}" if shard else ""


def in_shard(rows: list[dict], shard: Shard | None) -> list[dict]:
    """The rows of slice k of n, in their order (None: all of them)."""
    if shard is None:
        return rows
    k, n = shard
    if not 0 <= k < n:
        raise ValueError(f"shard {k} of {n} does not exist")
    return [row for row in rows if shard_of(row, n) == k]


def _kept(conn: sa.Connection, release_id: str) -> int:
    return conn.execute(sa.text("SELECT count(*) FROM release_candidates WHERE release_id = :r "
                                "AND status = 'kept'"), {"r": release_id}).scalar_one()


def extract_exemplars(ctx: ReleaseContext, shard: Shard | None = None, *, resolve: bool = False) -> dict:
    """Fetch each remaining candidate's e-print, find its related work and the references it cites.

    Candidates are taken in the month's sample order until `max_queries` are kept (release/sampling.py);
    the ones never reached are recorded as not sampled, so no paper the month will not keep is downloaded.
    `shard` (k, n) takes only every n-th candidate of that order, starting at the k-th: the DAG runs the n
    shards as mapped tasks, `build_release` as threads; each counts the month's kept papers in the
    warehouse, so together they stop at the cap (a paper or two in flight past it leave again at the end).
    `resolve`: look up the references of the papers kept, two papers at a time, while extraction goes on
    (_ResolveAsKept); the resolve step then only finishes what is left.
    """
    cap = ctx.config.max_queries
    with ctx.engine.connect() as conn:
        todo = in_shard(_candidates(conn, ctx.release_id, "source"), shard)
    counts: dict[str, int] = {"kept": 0}
    part = shard_label(shard)
    label = f"extract {ctx.release_id} {part}".rstrip()
    tracker = Progress(label, len(todo))
    resolver = _ResolveAsKept(ctx, enabled=resolve)
    for n, cand in enumerate(todo, start=1):
        if cap is not None and _kept_now(ctx) >= cap:
            cutoff = _cutoff_rank(ctx, cap)
            # Only a paper ranked before the last kept one (one in error, retried) can still enter.
            if cand["sample_rank"] is None or cutoff is None or cand["sample_rank"] > cutoff:
                counts["not_sampled"] = _mark_not_sampled(ctx, todo[n - 1:], cap)
                break
        outcome = _extract_and_store(ctx, cand, f"extract {n} of {len(todo)}" + (f" ({part})" if part else ""))
        counts[outcome] = counts.get(outcome, 0) + 1
        tracker.advance(note=", ".join(f"{k} {v}" for k, v in counts.items() if v))
        if outcome == "kept":
            resolver.add(cand["arxiv_id"])
    resolver.flush()
    if cap is not None:
        counts["over_cap"] = _drop_over_cap(ctx, cap)  # may include papers other shards kept
    log.info("%s: %s", label, counts)
    return counts


def _extract_and_store(ctx: ReleaseContext, cand: dict, where: str) -> str:
    """One candidate: extracted and stored as kept, or recorded as skipped or in error; returns the
    outcome counted ('kept', the skip reason, 'error'). An InfrastructureError stops the step."""
    arxiv_id = cand["arxiv_id"]

    def record(stage: str, status: str, reason: str | None, detail: str | None) -> None:
        with ctx.engine.begin() as conn:
            _set_candidates(conn, ctx.release_id, [{"arxiv_id": arxiv_id, "version": 1, "stage": stage,
                                                    "status": status, "reason": reason, "detail": detail}])

    try:
        query, refs, notes = _extract_one(ctx, cand)
    except SkipPaper as skip:
        log.info("%s: %s skipped at %s: %s", where, arxiv_id, skip.stage, skip.detail)
        record(skip.stage, "skipped", skip.reason, skip.detail)
        return skip.reason
    except InfrastructureError:  # arXiv down is not this paper's failure: stop, retry the step later
        raise
    except Exception as exc:  # one bad paper never stops the month; the error is kept for retry
        log.exception("%s: %s failed", where, arxiv_id)
        record("source", "error", type(exc).__name__, str(exc)[:2000])
        return "error"
    try:
        with ctx.engine.begin() as conn:
            db.upsert(conn, "release_queries", [query], key=["release_id", "arxiv_id"])
            db.upsert(conn, "exemplar_references", refs, key=["release_id", "arxiv_id", "cite_key"],
                      update=[c for c in refs[0] if c.startswith("bib_")])
            _set_candidates(conn, ctx.release_id, [{"arxiv_id": arxiv_id, "version": 1, "stage": "kept",
                                                    "status": "kept", "reason": None,
                                                    "detail": "; ".join(notes) or None}])
    except (sa.exc.DataError, ValueError) as exc:  # text PostgreSQL refuses: this paper's, not the month's
        log.warning("%s: %s could not be stored: %s", where, arxiv_id, exc)
        record("source", "error", "unstorable_text", str(exc)[:2000])  # the paper's rows rolled back together
        return "error"
    log.info("%s: %s kept (%d words, %d references)", where, arxiv_id, query["word_count"], len(refs))
    return "kept"


class _ResolveAsKept:
    """Resolves the references of kept papers a few papers at a time while extraction goes on.

    Why: extraction waits on arXiv's e-print host, resolution mostly on its API (and OpenAlex); run one
    after the other a month takes the sum of the two, interleaved about the larger. What a lookup could not
    settle stays pending for the resolve step (and its retries); after a failed lookup this shard leaves
    the rest to that step, so an outage is not hit once per paper.
    """

    PAPERS = 2  # ~50 references: one chunk of batched lookups

    def __init__(self, ctx: ReleaseContext, enabled: bool = True) -> None:
        self.ctx, self.papers, self.stopped = ctx, [], not enabled

    def add(self, arxiv_id: str) -> None:
        self.papers.append(arxiv_id)
        if len(self.papers) >= self.PAPERS:
            self.flush()

    def flush(self) -> None:
        from deepscholar.release.resolution import resolve_pending

        papers, self.papers = self.papers, []
        if not papers or self.stopped:
            return
        try:
            resolve_pending(self.ctx, papers=papers)
        except InfrastructureError as exc:
            self.stopped = True
            log.warning("extraction leaves reference lookups to the resolve step: %s", exc)


def _kept_now(ctx: ReleaseContext) -> int:
    """Kept papers of the month so far, whichever shard kept them."""
    with ctx.engine.connect() as conn:
        return _kept(conn, ctx.release_id)


def finish_extraction(ctx: ReleaseContext) -> dict:
    """After every shard: enforce the cap once more and report the month's extraction as a whole."""
    if ctx.config.max_queries is not None:
        _drop_over_cap(ctx, ctx.config.max_queries)
    with ctx.engine.connect() as conn:
        counts = release_counts(conn, ctx.release_id)
    summary = {"kept": counts["queries"], "dropped": counts["dropped"]}
    log.info("extraction of %s: %s", ctx.release_id, summary)
    return summary


def _cutoff_rank(ctx: ReleaseContext, cap: int) -> int | None:
    """The sample rank of the cap-th kept paper: the sample's last place."""
    with ctx.engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT sample_rank FROM release_candidates WHERE release_id = :r AND status = 'kept' "
            "ORDER BY sample_rank NULLS LAST, arxiv_id OFFSET :n LIMIT 1"), {"r": ctx.release_id, "n": cap - 1}).scalar()


def _mark_not_sampled(ctx: ReleaseContext, rest: list[dict], cap: int) -> int:
    """The cap is met: the candidates after the sample's last place are not downloaded at all.

    A candidate in error ranked before that place is retried by the next run and, if kept, takes the
    place of the last kept paper (_drop_over_cap), so transient download failures do not bias the sample.
    """
    rows = [{"arxiv_id": c["arxiv_id"], "version": 1, "stage": "sample", "status": "skipped",
             "reason": "not_sampled", "detail": f"sample rank {c['sample_rank']}: {cap} queries were kept "
                                                "before this paper's turn (max_queries)"} for c in rest]
    with ctx.engine.begin() as conn:
        _set_candidates(conn, ctx.release_id, rows)
    log.info("extraction: the cap of %d queries is met; %d candidates not sampled", cap, len(rows))
    return len(rows)


def _drop_over_cap(ctx: ReleaseContext, cap: int) -> int:
    """Keep the first `cap` kept papers in sample order; later ones (kept before a retried paper ranked
    ahead of them was) leave the release. A published release is never changed."""
    with ctx.engine.begin() as conn:
        status = conn.execute(sa.text("SELECT status FROM releases WHERE release_id = :r"),
                              {"r": ctx.release_id}).scalar()
        if status == "published":
            return 0
        extra = list(conn.execute(sa.text(
            "SELECT arxiv_id, sample_rank FROM release_candidates WHERE release_id = :r AND status = 'kept' "
            "ORDER BY sample_rank NULLS LAST, arxiv_id OFFSET :cap"), {"r": ctx.release_id, "cap": cap}))
        if not extra:
            return 0
        ids = [a for a, _ in extra]
        for table in ("exemplar_references", "release_queries"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE release_id = :r AND arxiv_id = ANY(:ids)"),
                         {"r": ctx.release_id, "ids": ids})
        _set_candidates(conn, ctx.release_id, [
            {"arxiv_id": a, "version": 1, "stage": "sample", "status": "skipped", "reason": "over_cap",
             "detail": f"sample rank {rank}: kept, then {cap} papers ranked before it were kept (max_queries)"}
            for a, rank in extra])
    log.info("extraction: %d kept papers ranked after the first %d leave the release", len(extra), cap)
    return len(extra)


def _extract_one(ctx: ReleaseContext, cand: dict) -> tuple[dict, list[dict], list[str]]:
    from deepscholar.sources.arxiv import EprintNotFound, fetch_eprint
    from deepscholar.sources.bibliography import parse_bibliography
    from deepscholar.sources.eprint import EprintError, NoLatexSourceError, extract_eprint
    from deepscholar.sources.latex import find_related_work, word_count

    cfg = ctx.config
    arxiv_id = cand["arxiv_id"]
    try:
        # arXiv's one request per interval holds for e-prints too (rate_limit: shared by every shard).
        payload = fetch_eprint(f"{arxiv_id}v1", base_url=cfg.arxiv_eprint_url, delay_seconds=cfg.arxiv_delay_seconds)
    except EprintNotFound as exc:
        raise SkipPaper("source", "no_source", str(exc)) from exc
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"eprint_{arxiv_id}_") as tmp:
        try:
            contents = extract_eprint(payload.content, Path(tmp))
        except NoLatexSourceError as exc:
            raise SkipPaper("source", "no_source_pdf", str(exc)) from exc
        except EprintError as exc:
            raise SkipPaper("source", "unsafe_or_bad_archive", str(exc)) from exc
        refused = contents.skipped_members  # shortened, at most 20 listed: a hostile archive may hold thousands
        notes += [f"refused archive member {name[:200]!r}: {why[:200]}" for name, why in refused[:20]]
        if len(refused) > 20:
            notes.append(f"and {len(refused) - 20} more refused archive members")
        section = find_related_work(contents.root)
        if section is None:
            raise SkipPaper("section", "no_related_work", "no related-work section found")
        words = word_count(section.text)
        if words > cfg.max_words:
            raise SkipPaper("section", "too_many_words", f"{words} words > cap {cfg.max_words}")
        bib = parse_bibliography(contents.root, section.main_tex)
    cited = [k for k in section.cite_keys if k in bib]
    missing = sorted(set(section.cite_keys) - set(cited))
    if missing:
        notes.append(f"{len(missing)} cite keys without a bibliography entry: {', '.join(missing[:20])}")
    if len(cited) < cfg.min_references:
        raise SkipPaper("bibliography", "too_few_references",
                        f"{len(cited)} cited references with bibliography entries < minimum {cfg.min_references}")
    query = {
        "release_id": ctx.release_id, "arxiv_id": arxiv_id, "version": 1, "title": cand["title"],
        "abstract": cand["abstract"], "authors": cand["authors"], "published": cand["published"],
        "venue": cand.get("venue"), "section_title": section.title, "section_level": section.level,
        "section_file": section.file, "section_raw_latex": section.raw_latex, "section_text": section.text,
        "word_count": words, "n_cite_keys": len(cited),
        "extraction_notes": {"main_tex": section.main_tex, "archive_kind": contents.kind, "notes": notes,
                             "missing_cite_keys": missing},
    }
    refs = []
    for key in cited:
        e = bib[key]
        refs.append({
            "release_id": ctx.release_id, "arxiv_id": arxiv_id, "cite_key": key, "bib_type": e.entry_type,
            "bib_title": e.title, "bib_authors": e.authors, "bib_year": e.year, "bib_doi": e.doi,
            "bib_url": e.url, "bib_fields": {k: str(v) for k, v in (e.raw_fields or {}).items()},
        })
    return query, refs, notes


# --- 6. resolve references ------------------------------------------------------------------------------

def resolve_references(ctx: ReleaseContext, shard: Shard | None = None) -> dict:
    """Each pending reference to an arXiv paper and an OpenAlex work, in batches (release/resolution.py);
    `shard` (k, n): only the references of every n-th query paper."""
    from deepscholar.release.resolution import resolve_pending

    return resolve_pending(ctx, shard)


# --- 7. judges ------------------------------------------------------------------------------------------

def _judge(ctx: ReleaseContext):
    from deepscholar.release.judging import make_release_judge

    cfg = ctx.config
    return make_release_judge(cfg.judge, ctx.engine, api_base=cfg.judge_api_base,
                              concurrency=cfg.judge_concurrency)


def _queries(conn: sa.Connection, release_id: str) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT arxiv_id, title, abstract, section_text FROM release_queries WHERE release_id = :r "
        "ORDER BY arxiv_id"), {"r": release_id}).mappings()]


def label_importance(ctx: ReleaseContext) -> dict:
    """Label each exemplar reference important or not (METRICS.md: reference coverage)."""
    from deepscholar.release.judging import QueryContext, ReferenceContext

    judge = _judge(ctx)
    counts = {"important": 0, "not_important": 0, "unscored": 0}
    with ctx.engine.connect() as conn:
        queries = _queries(conn, ctx.release_id)
    for n, q in enumerate(queries, start=1):
        with ctx.engine.connect() as conn:
            refs = [dict(r) for r in conn.execute(sa.text(
                "SELECT * FROM exemplar_references WHERE release_id = :r AND arxiv_id = :a ORDER BY cite_key"),
                {"r": ctx.release_id, "a": q["arxiv_id"]}).mappings()]
        # All of a query's references are judged together (a judge may rank them against each other),
        # and only when one of them lacks a label from this judge.
        if all(r["is_important"] is not None and r["importance_judge"] == judge.config_id for r in refs):
            continue
        verdicts = judge.label_importance(
            QueryContext(q["arxiv_id"], q["title"], q["abstract"], q["section_text"]),
            [ReferenceContext(cite_key=r["cite_key"], title=r["resolved_title"] or r["bib_title"] or "",
                              authors=r["bib_authors"] or "",
                              snippet=r["resolved_abstract"] or _bib_venue(r),
                              arxiv_id=r["resolved_arxiv_id"]) for r in refs])
        rows = []
        for ref, verdict in zip(refs, verdicts, strict=True):
            if verdict.value is None:
                counts["unscored"] += 1
                rows.append({"release_id": ctx.release_id, "arxiv_id": q["arxiv_id"], "cite_key": ref["cite_key"],
                             "is_important": None, "importance_judge": judge.config_id,
                             "importance_reason": f"unscored: {verdict.unscored_reason}"})
                continue
            counts["important" if verdict.value else "not_important"] += 1
            rows.append({"release_id": ctx.release_id, "arxiv_id": q["arxiv_id"], "cite_key": ref["cite_key"],
                         "is_important": bool(verdict.value), "importance_judge": judge.config_id,
                         "importance_reason": getattr(verdict, "reason", None)})
        with ctx.engine.begin() as conn:
            db.upsert(conn, "exemplar_references", rows, key=["release_id", "arxiv_id", "cite_key"])
        log.info("importance %d of %d queries: %s (%d references)", n, len(queries), q["arxiv_id"], len(refs))
    log.info("importance labels: %s", counts)
    return counts


def _bib_venue(ref: dict) -> str:
    """What a bibliography entry says beyond its title, when no abstract was found."""
    fields = ref["bib_fields"] or {}
    parts = [fields.get(k) for k in ("journal", "booktitle", "publisher", "howpublished", "note")]
    return ", ".join(p for p in parts + [ref["bib_year"]] if p)


def nuggetize_exemplars(ctx: ReleaseContext) -> dict:
    """Extract and label the exemplar's nuggets once per query (METRICS.md: nugget coverage)."""
    from deepscholar.release.judging import QueryContext

    judge = _judge(ctx)
    counts = {"queries": 0, "nuggets": 0, "vital": 0, "unscored": 0}
    with ctx.engine.connect() as conn:
        queries = _queries(conn, ctx.release_id)
        done = set(conn.execute(sa.text(
            "SELECT DISTINCT arxiv_id FROM nuggets WHERE release_id = :r AND judge_config = :j"),
            {"r": ctx.release_id, "j": judge.config_id}).scalars())
    for n, q in enumerate(queries, start=1):
        if q["arxiv_id"] in done:
            continue
        verdict = judge.nuggetize(QueryContext(q["arxiv_id"], q["title"], q["abstract"], q["section_text"]))
        if verdict.value is None:
            counts["unscored"] += 1
            log.warning("nuggets %d of %d: %s unscored: %s", n, len(queries), q["arxiv_id"], verdict.unscored_reason)
            continue
        rows = [{"release_id": ctx.release_id, "arxiv_id": q["arxiv_id"], "nugget_idx": i, "text": nug.text,
                 "importance": nug.importance, "judge_config": judge.config_id}
                for i, nug in enumerate(verdict.value)]
        with ctx.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM nuggets WHERE release_id = :r AND arxiv_id = :a"),
                         {"r": ctx.release_id, "a": q["arxiv_id"]})
            db.upsert(conn, "nuggets", rows, key=["release_id", "arxiv_id", "nugget_idx"])
        counts["queries"] += 1
        counts["nuggets"] += len(rows)
        counts["vital"] += sum(r["importance"] == "vital" for r in rows)
        log.info("nuggets %d of %d: %s -> %d nuggets", n, len(queries), q["arxiv_id"], len(rows))
    log.info("nuggets: %s", counts)
    return counts


# --- 8. gate and publish ---------------------------------------------------------------------------------

def gate_release(ctx: ReleaseContext):
    from deepscholar.release.quality import apply_gate, run_release_gate

    result = run_release_gate(ctx.engine, ctx.release_id, ctx.config)
    apply_gate(ctx.engine, ctx.release_id, result)
    with ctx.engine.begin() as conn:
        conn.execute(sa.text("UPDATE releases SET counts = CAST(:c AS jsonb) WHERE release_id = :r"),
                     {"c": json.dumps(release_counts(conn, ctx.release_id)), "r": ctx.release_id})
    return result


def publish(ctx: ReleaseContext) -> dict:
    from deepscholar.release.quality import publish_release

    publish_release(ctx.engine, ctx.release_id)
    with ctx.engine.connect() as conn:
        counts = release_counts(conn, ctx.release_id)
    log.info("published release %s: %s", ctx.release_id, counts)
    return counts


# --- summaries -------------------------------------------------------------------------------------------

def release_counts(conn: sa.Connection, release_id: str) -> dict:
    """The figures users look at: papers seen and kept per filter, queries, references, nuggets."""
    one = conn.execute(sa.text("""
        SELECT
          (SELECT count(*) FROM release_candidates WHERE release_id = :r) AS papers_seen,
          (SELECT count(*) FROM release_queries WHERE release_id = :r) AS queries,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r) AS references,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r
             AND (resolved_arxiv_id IS NOT NULL OR openalex_id IS NOT NULL)) AS resolved,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r AND resolved_arxiv_id IS NOT NULL)
             AS resolved_arxiv,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r AND is_important) AS important,
          (SELECT count(*) FROM nuggets WHERE release_id = :r) AS nuggets,
          (SELECT count(*) FROM nuggets WHERE release_id = :r AND importance = 'vital') AS vital_nuggets
    """), {"r": release_id}).mappings().one()
    dropped = conn.execute(sa.text(
        "SELECT coalesce(reason, status) AS reason, count(*) AS n FROM release_candidates "
        "WHERE release_id = :r AND status <> 'kept' GROUP BY 1 ORDER BY 1"), {"r": release_id}).all()
    return dict(one) | {"dropped": {r.reason: r.n for r in dropped}}


def run_sharded(ctx: ReleaseContext, step, **kwargs) -> None:
    """Run a sharded step's slices at once in threads, as the DAG's mapped tasks run in processes; the
    first failure is raised once every slice has stopped (each keeps what it stored)."""
    from concurrent.futures import ThreadPoolExecutor

    n = release_shards()
    if n == 1:
        step(ctx, **kwargs)
        return
    with ThreadPoolExecutor(n, thread_name_prefix=step.__name__) as pool:
        futures = [pool.submit(step, ctx, (k, n), **kwargs) for k in range(n)]
    for future in futures:
        future.result()


def build_release(engine: Engine, release_id: str, config: ReleaseConfig) -> dict:
    """Every step in order, outside Airflow (the DAG calls the same functions one task each)."""
    ctx = open_release(engine, release_id, config)
    search_candidates(ctx)
    filter_candidates(ctx)
    run_sharded(ctx, extract_exemplars, resolve=True)
    finish_extraction(ctx)
    run_sharded(ctx, resolve_references)
    label_importance(ctx)
    nuggetize_exemplars(ctx)
    result = gate_release(ctx)
    if result.success:
        publish(ctx)
    with engine.connect() as conn:
        return release_counts(conn, release_id) | {"gx_success": result.success}
