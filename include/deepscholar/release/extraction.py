"""Steps 3-5: each candidate's e-print, its related-work section and the references it cites."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import sqlalchemy as sa

from deepscholar import db
from deepscholar.errors import InfrastructureError
from deepscholar.progress import Progress
from deepscholar.release.candidates import candidates_at, release_counts, set_candidates
from deepscholar.release.context import ReleaseContext
from deepscholar.release.sample_cap import cutoff_rank, drop_over_cap, kept_now, mark_not_sampled
from deepscholar.release.shards import Shard, in_shard, shard_label

__all__ = ["SkipPaper", "extract_exemplars", "extract_paper", "finish_extraction"]

log = logging.getLogger("deepscholar.release")


class SkipPaper(Exception):
    """A paper that cannot become a query, with the stage and machine-readable reason."""

    def __init__(self, stage: str, reason: str, detail: str):
        super().__init__(detail)
        self.stage, self.reason, self.detail = stage, reason, detail


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
    cap = ctx.spec.max_queries
    with ctx.engine.connect() as conn:
        todo = in_shard(candidates_at(conn, ctx.release_id, "source"), shard)
    counts: dict[str, int] = {"kept": 0}
    part = shard_label(shard)
    label = f"extract {ctx.release_id} {part}".rstrip()
    tracker = Progress(label, len(todo))
    resolver = _ResolveAsKept(ctx, enabled=resolve)
    for n, cand in enumerate(todo, start=1):
        if cap is not None and kept_now(ctx) >= cap:
            cutoff = cutoff_rank(ctx, cap)
            # Only a paper ranked before the last kept one (one in error, retried) can still enter.
            if cand["sample_rank"] is None or cutoff is None or cand["sample_rank"] > cutoff:
                counts["not_sampled"] = mark_not_sampled(ctx, todo[n - 1:], cap)
                break
        outcome = _extract_and_store(ctx, cand, f"extract {n} of {len(todo)}" + (f" ({part})" if part else ""))
        counts[outcome] = counts.get(outcome, 0) + 1
        tracker.advance(note=", ".join(f"{k} {v}" for k, v in counts.items() if v))
        if outcome == "kept":
            resolver.add(cand["arxiv_id"])
    resolver.flush()
    if cap is not None:
        counts["over_cap"] = drop_over_cap(ctx, cap)  # may include papers other shards kept
    log.info("%s: %s", label, counts)
    return counts


def _extract_and_store(ctx: ReleaseContext, cand: dict, where: str) -> str:
    """One candidate: extracted and stored as kept, or recorded as skipped or in error; returns the
    outcome counted ('kept', the skip reason, 'error'). An InfrastructureError stops the step."""
    arxiv_id = cand["arxiv_id"]

    def record(stage: str, status: str, reason: str | None, detail: str | None) -> None:
        with ctx.engine.begin() as conn:
            set_candidates(conn, ctx.release_id, [{"arxiv_id": arxiv_id, "version": 1, "stage": stage,
                                                    "status": status, "reason": reason, "detail": detail}])

    try:
        query, refs, notes = extract_paper(ctx, cand)
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
            set_candidates(conn, ctx.release_id, [{"arxiv_id": arxiv_id, "version": 1, "stage": "kept",
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
        self.ctx = ctx
        self.papers: list[str] = []
        self.stopped = not enabled

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


def finish_extraction(ctx: ReleaseContext) -> dict:
    """After every shard: enforce the cap once more and report the month's extraction as a whole."""
    if ctx.spec.max_queries is not None:
        drop_over_cap(ctx, ctx.spec.max_queries)
    with ctx.engine.connect() as conn:
        counts = release_counts(conn, ctx.release_id)
    summary = {"kept": counts["queries"], "dropped": counts["dropped"]}
    log.info("extraction of %s: %s", ctx.release_id, summary)
    return summary


def extract_paper(ctx: ReleaseContext, cand: dict) -> tuple[dict, list[dict], list[str]]:
    from deepscholar.sources.arxiv import EprintNotFound, fetch_eprint
    from deepscholar.sources.bibliography import parse_bibliography
    from deepscholar.sources.eprint import EprintError, NoLatexSourceError, extract_eprint
    from deepscholar.sources.latex import find_related_work
    from deepscholar.sources.latex_text import word_count

    spec, settings = ctx.spec, ctx.settings
    arxiv_id = cand["arxiv_id"]
    try:
        # arXiv's one request per interval holds for e-prints too (rate_limit: shared by every shard).
        payload = fetch_eprint(f"{arxiv_id}v1", base_url=settings.arxiv_eprint_url,
                               delay_seconds=settings.arxiv_delay_seconds)
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
        if words > spec.max_words:
            raise SkipPaper("section", "too_many_words", f"{words} words > cap {spec.max_words}")
        bib = parse_bibliography(contents.root, section.main_tex)
    cited = [k for k in section.cite_keys if k in bib]
    missing = sorted(set(section.cite_keys) - set(cited))
    if missing:
        notes.append(f"{len(missing)} cite keys without a bibliography entry: {', '.join(missing[:20])}")
    if len(cited) < spec.min_references:
        raise SkipPaper("bibliography", "too_few_references",
                        f"{len(cited)} cited references with bibliography entries < minimum {spec.min_references}")
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
