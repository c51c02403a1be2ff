"""The BM25 index behind `local` search: a cache on disk derived from the warehouse's `corpus`, never a source.

Design notes: docs/MODULE_NOTES.md, `deepscholar.search.bm25_index`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.clock import assume_utc
from deepscholar.db import check_holds_no_connection

__all__ = ["Bm25Index", "build_index", "corpus_fingerprint", "current_index", "default_index_dir",
           "ensure_index", "forget_loaded", "query_lexemes"]

FORMAT = 1  # bump when the files or the weighting change: old caches are then ignored
K1 = 1.2
B = 0.75
TITLE_WEIGHT = 2
MAX_QUERY_TERMS = 64  # the first distinct words of a text, as the old OR query took
BATCH = 5000
SEGMENT_POSTINGS = 4_000_000  # the build writes its postings to disk in segments of this many (its memory)
MERGE_POSTINGS = 4_000_000  # and merges them into the index's files about this many at a time
KEEP_INDEXES = 2  # per warehouse: the newest and the one before (a process may still be loading it)
STALE_TMP_SECONDS = 3600

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ENTRY_RE = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")
_WORD_RE = re.compile(r"[^\W_]+")

_FINGERPRINT_SQL = sa.text(
    "SELECT count(*) AS n, max(added_at) AS last_added, coalesce(sum(xmin::text::bigint), 0) AS xmin_sum "
    "FROM corpus")
_ROWS_SQL = sa.text(
    "SELECT arxiv_id, published, search_vector::text AS vec FROM corpus "
    "WHERE published IS NOT NULL ORDER BY published, arxiv_id")
_LEXEMES_SQL = sa.text("SELECT tsvector_to_array(to_tsvector('english', :text))")


def _micros(ts: datetime) -> int:
    return (assume_utc(ts) - _EPOCH) // timedelta(microseconds=1)


def corpus_fingerprint(conn: sa.Connection) -> str:
    """Changes whenever a corpus row is inserted, updated or deleted (one scan of the table, no detoasting)."""
    row = conn.execute(_FINGERPRINT_SQL).one()
    last = row.last_added.isoformat() if row.last_added else "-"
    return f"n{row.n}-t{last}-x{row.xmin_sum}"


def query_lexemes(conn: sa.Connection, text: str) -> list[str]:
    """The text's first MAX_QUERY_TERMS distinct words as PostgreSQL's English configuration stems them."""
    words = list(dict.fromkeys(w.lower() for w in _WORD_RE.findall(text or "")))[:MAX_QUERY_TERMS]
    if not words:
        return []
    return list(conn.execute(_LEXEMES_SQL, {"text": " ".join(words)}).scalar_one() or [])


def _warehouse_key(engine: Engine) -> str:
    """One cache folder per warehouse (URL without the password)."""
    url = engine.url.set(password=None).render_as_string(hide_password=True)
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def _index_name(fingerprint: str) -> str:
    return f"v{FORMAT}-" + hashlib.sha256(fingerprint.encode()).hexdigest()[:20]


def default_index_dir() -> Path:
    from deepscholar.settings import current_settings

    settings = current_settings()
    return Path(settings.search_index_dir or Path(settings.home) / "search-index")


# --- the index ------------------------------------------------------------------------------------------


@dataclass
class Bm25Index:
    """One built index, memory-mapped (the page cache is shared by every process on the machine)."""

    path: Path
    fingerprint: str
    n_docs: int
    n_terms: int
    vocab: dict[str, int]
    term_ptr: np.ndarray  # int64 [n_terms + 1]: postings of term t are [term_ptr[t], term_ptr[t + 1])
    post_doc: np.ndarray  # int32: document of each posting, ascending within a term
    post_w: np.ndarray  # float32: BM25 weight of the term in that document
    published: np.ndarray  # int64 microseconds since 1970, ascending (documents in (published, arxiv_id) order)
    ids: np.ndarray  # bytes arxiv id of each document
    id_rank: np.ndarray  # int32: the document's place in arxiv id order (the tie-break)
    sorted_ids: np.ndarray  # bytes ids in ascending order, and
    sorted_doc: np.ndarray  # int32: the document each of them is

    @classmethod
    def load(cls, path: Path) -> Bm25Index:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        vocab_list = json.loads((path / "vocab.json").read_text(encoding="utf-8"))

        def arr(name: str) -> np.ndarray:
            return np.load(path / f"{name}.npy", mmap_mode="r")

        return cls(path=path, fingerprint=meta["fingerprint"], n_docs=meta["n_docs"], n_terms=len(vocab_list),
                   vocab={t: i for i, t in enumerate(vocab_list)}, term_ptr=arr("term_ptr"),
                   post_doc=arr("post_doc"), post_w=arr("post_w"), published=arr("published"), ids=arr("ids"),
                   id_rank=arr("id_rank"), sorted_ids=arr("sorted_ids"), sorted_doc=arr("sorted_doc"))

    def doc_of(self, arxiv_ids: Sequence[str]) -> np.ndarray:
        """The documents of those ids that are indexed."""
        width = self.sorted_ids.dtype.itemsize
        encoded = [e for e in (a.encode() for a in arxiv_ids) if len(e) <= width]  # longer: not indexed
        if not encoded or not self.n_docs:
            return np.zeros(0, dtype=np.int64)
        wanted = np.array(encoded, dtype=self.sorted_ids.dtype)
        at = np.minimum(np.searchsorted(self.sorted_ids, wanted), self.n_docs - 1)
        found = self.sorted_ids[at] == wanted
        return np.asarray(self.sorted_doc[at[found]], dtype=np.int64)

    def rank(self, lexemes: Sequence[str], cutoff: datetime, exclude_ids: Sequence[str], m: int
             ) -> list[tuple[str, float]]:
        """The best m (arxiv_id, score) published strictly before the cutoff, by score then arxiv id."""
        hi = int(np.searchsorted(self.published, _micros(cutoff), side="left"))
        terms = sorted({self.vocab[w] for w in lexemes if w in self.vocab})
        if not hi or not terms or m <= 0:
            return []
        scores = np.zeros(hi, dtype=np.float32)
        for t in terms:  # a fixed order: the sums are the same in every process
            start, end = int(self.term_ptr[t]), int(self.term_ptr[t + 1])
            docs = self.post_doc[start:end]
            cut = int(np.searchsorted(docs, hi))
            if cut:  # indexing with int64 is several times faster than with the stored int32
                scores[docs[:cut].astype(np.int64)] += self.post_w[start:start + cut]
        excluded = self.doc_of(exclude_ids)
        scores[excluded[excluded < hi]] = 0
        if np.count_nonzero(scores) > m:  # keep every paper tied with the m-th, then order ties by arxiv id
            threshold = np.partition(scores, hi - m)[hi - m]  # the m-th best score (> 0: more score)
            cand = np.flatnonzero(scores >= threshold)
        else:
            cand = np.flatnonzero(scores)
        order = np.lexsort((self.id_rank[cand], -scores[cand]))[:m]
        best = cand[order]
        return [(self.ids[d].decode(), float(scores[d])) for d in best]


# --- building -----------------------------------------------------------------------------------------------


def _parse(vec: str, vocab: dict[str, int]) -> tuple[list[int], list[int]]:
    """Term ids and weighted term frequencies of one stored tsvector's text."""
    terms, tfs = [], []
    for lexeme, positions in _ENTRY_RE.findall(vec):
        if "'" in lexeme or "\\" in lexeme:
            lexeme = lexeme.replace("''", "'").replace("\\\\", "\\")
        terms.append(vocab.setdefault(lexeme, len(vocab)))
        tfs.append(positions.count(",") + 1 + (TITLE_WEIGHT - 1) * positions.count("A"))
    return terms, tfs


def _write(path: Path, name: str, array: np.ndarray) -> None:
    np.save(path / f"{name}.npy", array, allow_pickle=False)


@dataclass
class _Segment:
    """A run of consecutive documents' postings on disk, sorted by term (documents ascending within a term)."""

    folder: Path
    n_terms: int  # the vocabulary's size when it was written: later terms have no postings here

    def term_ptr(self, terms: np.ndarray) -> np.ndarray:
        """Where the postings of each of those terms start in this segment's files (n_terms: the end)."""
        ptr = np.load(self.folder / "term_ptr.npy", mmap_mode="r")
        return np.asarray(ptr[np.minimum(terms, self.n_terms)], dtype=np.int64)

    def read(self, name: str, dtype: type, start: int, stop: int) -> np.ndarray:
        """Postings [start, stop) of one of its files, read (not mapped: the merge's memory stays its own)."""
        size = np.dtype(dtype).itemsize
        return np.fromfile(self.folder / f"{name}.bin", dtype=dtype, count=stop - start, offset=start * size)


class _SegmentWriter:
    """The first pass: documents' postings gathered in memory and written out as a sorted segment whenever
    SEGMENT_POSTINGS are held, so the build's memory is bounded by a segment, not by the corpus. What the
    weights need from the whole corpus (each term's document frequency, each document's length) is kept."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.vocab: dict[str, int] = {}
        self.segments: list[_Segment] = []
        self.df = np.zeros(0, dtype=np.int64)
        self.ids: list[np.ndarray] = []  # bytes arxiv ids, one array per segment
        self.published: list[np.ndarray] = []  # int64 microseconds, likewise
        self.dl: list[np.ndarray] = []  # float64 weighted length of each document, likewise
        self.n_docs = 0
        self._clear()

    def _clear(self) -> None:
        self._ids: list[str] = []
        self._published: list[int] = []
        self._lengths: list[int] = []
        self._term_chunks: list[np.ndarray] = []
        self._tf_chunks: list[np.ndarray] = []
        self._terms: list[int] = []
        self._tfs: list[int] = []
        self._postings = 0

    def add(self, arxiv_id: str, published: datetime, vec: str) -> None:
        terms, tfs = _parse(vec, self.vocab)
        self._ids.append(arxiv_id)
        self._published.append(_micros(published))
        self._lengths.append(len(terms))
        self._terms += terms
        self._tfs += tfs
        self._postings += len(terms)
        if len(self._terms) >= BATCH * 100:  # Python lists cost ~30 bytes a posting: to numpy often
            self._chunk()
        if self._postings >= SEGMENT_POSTINGS:
            self.flush()

    def _chunk(self) -> None:
        self._term_chunks.append(np.array(self._terms, dtype=np.int32))
        self._tf_chunks.append(np.array(self._tfs, dtype=np.float32))
        self._terms, self._tfs = [], []

    def flush(self) -> None:
        """Writes the documents gathered so far as the next segment."""
        if not self._ids:
            return
        self._chunk()
        n_terms, first_doc, n_docs = len(self.vocab), self.n_docs, len(self._ids)
        term = np.concatenate(self._term_chunks)
        tf = np.concatenate(self._tf_chunks)
        doc = np.repeat(np.arange(first_doc, first_doc + n_docs, dtype=np.int32),
                        np.array(self._lengths, dtype=np.int64))
        self.dl.append(np.bincount(doc - first_doc, weights=tf, minlength=n_docs))
        counts = np.bincount(term, minlength=n_terms)
        self.df = np.concatenate([self.df, np.zeros(n_terms - len(self.df), dtype=np.int64)])
        self.df += counts
        order = np.argsort(term, kind="stable")  # by term; documents stay ascending within a term
        folder = self.folder / f"{len(self.segments):06d}"
        folder.mkdir()
        doc[order].tofile(folder / "doc.bin")
        tf[order].tofile(folder / "tf.bin")
        term_ptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts, out=term_ptr[1:])
        _write(folder, "term_ptr", term_ptr)
        self.segments.append(_Segment(folder, n_terms))
        self.ids.append(np.array([i.encode() for i in self._ids], dtype=f"S{max(len(i) for i in self._ids)}"))
        self.published.append(np.array(self._published, dtype=np.int64))
        self.n_docs += n_docs
        self._clear()


def _merge(writer: _SegmentWriter, tmp: Path, df: np.ndarray, idf: np.ndarray, norm: np.ndarray) -> None:
    """The second pass: term_ptr, post_doc and post_w, the last two written a block of terms at a time
    (about MERGE_POSTINGS postings; a longer term is a block of its own).

    A term's postings are its postings in each segment, one segment after another: segments hold
    consecutive documents in order. Each weight is computed as a one-pass build would, in float32."""
    n_terms = len(df)
    term_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=term_ptr[1:])
    _write(tmp, "term_ptr", term_ptr)
    n_postings = int(term_ptr[-1])
    block_starts = np.searchsorted(term_ptr, np.arange(MERGE_POSTINGS, n_postings, MERGE_POSTINGS),
                                   side="right") - 1
    bounds = np.unique(np.concatenate([[0], block_starts, [n_terms]]))
    seg_ptrs = [segment.term_ptr(bounds) for segment in writer.segments]
    idf32 = idf.astype(np.float32)
    k1_plus_1 = np.float32(K1 + 1)
    with _npy_writer(tmp / "post_doc.npy", np.int32, n_postings) as doc_out, \
            _npy_writer(tmp / "post_w.npy", np.float32, n_postings) as w_out:
        for b in range(len(bounds) - 1):
            t0, t1 = int(bounds[b]), int(bounds[b + 1])
            base = int(term_ptr[t0])
            block_doc = np.empty(int(term_ptr[t1]) - base, dtype=np.int32)
            block_w = np.empty(len(block_doc), dtype=np.float32)
            filled = term_ptr[t0:t1] - base  # where each term's next postings go in the block
            for segment, ptr in zip(writer.segments, seg_ptrs, strict=True):
                start, stop = int(ptr[b]), int(ptr[b + 1])
                if start == stop:
                    continue
                local = segment.term_ptr(np.arange(t0, t1 + 1))
                counts = np.diff(local)
                term = np.repeat(np.arange(t0, t1, dtype=np.int64), counts)
                doc = segment.read("doc", np.int32, start, stop)
                tf = segment.read("tf", np.float32, start, stop)
                weight = tf * k1_plus_1
                denominator = norm[doc]
                denominator += tf
                weight /= denominator
                weight *= idf32[term]
                dest = np.arange(stop - start, dtype=np.int64)
                dest -= np.repeat(local[:-1] - start, counts)  # the posting's place within its term here
                dest += np.repeat(filled, counts)
                block_doc[dest] = doc
                block_w[dest] = weight
                filled += counts
            block_doc.tofile(doc_out)
            block_w.tofile(w_out)


@contextlib.contextmanager
def _npy_writer(path: Path, dtype: type, length: int) -> Iterator[BinaryIO]:
    """A one-dimensional .npy file (the header np.save writes) whose data the caller appends in order."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                 "fortran_order": False, "shape": (length,)})
        data_start = f.tell()
        yield f
        if f.tell() - data_start != length * np.dtype(dtype).itemsize:
            raise RuntimeError(f"{path.name}: wrote {f.tell() - data_start} bytes for {length} values")


def _build_into(conn: sa.Connection, tmp: Path) -> str:
    """Reads the corpus in one snapshot and writes the index files into `tmp`; returns its fingerprint.

    Two passes, in memory bounded by SEGMENT_POSTINGS and MERGE_POSTINGS (plus the vocabulary and a few
    numbers per document): sorted segments written to disk, then merged term by term into the final files."""
    fingerprint = corpus_fingerprint(conn)
    work = tmp / "segments"
    work.mkdir()
    writer = _SegmentWriter(work)
    result = conn.execution_options(stream_results=True, yield_per=BATCH).execute(_ROWS_SQL)
    for rows in result.partitions(BATCH):  # without a size the driver hands over every row at once
        for arxiv_id, pub, vec in rows:
            writer.add(arxiv_id, pub, vec or "")
    writer.flush()
    n_docs, n_terms = writer.n_docs, len(writer.vocab)
    dl = np.concatenate(writer.dl) if writer.dl else np.zeros(0, dtype=np.float64)
    avgdl = float(dl.mean()) if n_docs else 1.0
    df = np.concatenate([writer.df, np.zeros(n_terms - len(writer.df), dtype=np.int64)])
    idf = np.log1p((n_docs - df.astype(np.float64) + 0.5) / (df.astype(np.float64) + 0.5))
    norm = (K1 * (1 - B + B * dl / avgdl)).astype(np.float32)
    _merge(writer, tmp, df, idf, norm)
    shutil.rmtree(work)
    ids = np.concatenate(writer.ids) if writer.ids else np.zeros(0, dtype="S1")
    published = np.concatenate(writer.published) if writer.published else np.zeros(0, dtype=np.int64)
    _write_documents(tmp, ids, published)
    _write_vocab(tmp, writer.vocab)
    meta = {"format": FORMAT, "fingerprint": fingerprint, "n_docs": n_docs, "n_terms": n_terms, "avgdl": avgdl,
            "k1": K1, "b": B, "title_weight": TITLE_WEIGHT, "built_at": datetime.now(UTC).isoformat()}
    (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")  # last: marks the folder complete
    return fingerprint


def _write_documents(tmp: Path, id_array: np.ndarray, published: np.ndarray) -> None:
    """The per-document files: arXiv ids and publication times in document order, and the ids sorted with
    their documents (and each document's place in that order), so `doc_of` finds ids by binary search."""
    n_docs = len(id_array)
    by_id = np.argsort(id_array, kind="stable").astype(np.int32)
    id_rank = np.empty(n_docs, dtype=np.int32)
    id_rank[by_id] = np.arange(n_docs, dtype=np.int32)
    _write(tmp, "published", published)
    _write(tmp, "ids", id_array)
    _write(tmp, "id_rank", id_rank)
    _write(tmp, "sorted_ids", id_array[by_id])
    _write(tmp, "sorted_doc", by_id)


def _write_vocab(tmp: Path, vocab: dict[str, int]) -> None:
    """vocab.json: the lexemes in term-number order, so a query's lexemes map to the posting lists' terms."""
    vocab_list = [""] * len(vocab)
    for lexeme, i in vocab.items():
        vocab_list[i] = lexeme
    (tmp / "vocab.json").write_text(json.dumps(vocab_list, ensure_ascii=False), encoding="utf-8")


def build_index(engine: Engine, warehouse_dir: Path) -> Path:
    """Builds the index of the corpus as it is now into warehouse_dir/<name>; returns that folder.

    The caller holds the warehouse's build lock. Written aside and renamed, so the folder appears whole.
    """
    warehouse_dir.mkdir(parents=True, exist_ok=True)
    tmp = warehouse_dir / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
            fingerprint = _build_into(conn, tmp)
        final = warehouse_dir / _index_name(fingerprint)
        if (final / "meta.json").exists():
            shutil.rmtree(tmp)
            return final
        try:
            os.rename(tmp, final)
        except OSError as exc:  # another machine sharing the folder got there first
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            shutil.rmtree(tmp)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _prune(warehouse_dir: Path, keep: set[Path]) -> None:
    """Drops all but the newest KEEP_INDEXES indexes (and `keep`) and temporary folders of dead builds."""
    done = sorted((p for p in warehouse_dir.glob(f"v{FORMAT}-*") if (p / "meta.json").exists()),
                  key=lambda p: (p / "meta.json").stat().st_mtime, reverse=True)
    for old in done[KEEP_INDEXES:]:
        if old not in keep:
            shutil.rmtree(old, ignore_errors=True)  # a process that mapped its files keeps reading them
    for other in warehouse_dir.iterdir():
        stale = other.name.startswith(".tmp-") and time.time() - other.stat().st_mtime > STALE_TMP_SECONDS
        if stale or (other.name.startswith("v") and not other.name.startswith(f"v{FORMAT}-")):
            shutil.rmtree(other, ignore_errors=True)


@contextlib.contextmanager
def _build_lock(warehouse_dir: Path, *, wait: bool) -> Iterator[bool]:
    """The warehouse's exclusive build lock across processes; yields False when busy and not waiting."""
    warehouse_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(warehouse_dir / "build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --- this process's view ------------------------------------------------------------------------------------


@dataclass
class _Slot:
    index: Bm25Index | None = None
    checked: float = float("-inf")  # time.monotonic() of the last fingerprint check
    lock: threading.Lock = field(default_factory=threading.Lock)


_SLOTS: dict[tuple[str, str], _Slot] = {}
_SLOTS_LOCK = threading.Lock()
BUSY_RECHECK_SECONDS = 1.0


def forget_loaded() -> None:
    """Drops this process's loaded indexes (the files stay): the next search checks and loads again."""
    with _SLOTS_LOCK:
        _SLOTS.clear()


def _slot(root: Path, engine: Engine) -> tuple[_Slot, Path]:
    key = _warehouse_key(engine)
    with _SLOTS_LOCK:
        slot = _SLOTS.setdefault((str(root.resolve()), key), _Slot())
    return slot, root / key


def current_index(engine: Engine, root: Path, check_seconds: float) -> Bm25Index:
    """The index of the corpus as it is now (as of the last check, at most check_seconds ago).

    The slot's lock is held while a connection is taken (the fingerprint, a build), so a caller must hold
    none of the engine's connections: threads holding the pool's connections while waiting for this lock
    would starve its holder (checked under DEEPSCHOLAR_POOL_GUARD)."""
    check_holds_no_connection(engine, "the search index's lock (bm25_index.current_index)")
    slot, warehouse_dir = _slot(root, engine)
    with slot.lock:
        now = time.monotonic()
        if slot.index is not None and now - slot.checked < check_seconds:
            return slot.index
        with engine.connect() as conn:
            fingerprint = corpus_fingerprint(conn)
        if slot.index is not None and slot.index.fingerprint == fingerprint:
            slot.checked = now
            return slot.index
        path = warehouse_dir / _index_name(fingerprint)
        if (path / "meta.json").exists():
            with contextlib.suppress(FileNotFoundError):  # pruned meanwhile (the corpus moved on twice)
                slot.index = Bm25Index.load(path)
                slot.checked = now
                return slot.index
        held = slot.index
        with _build_lock(warehouse_dir, wait=held is None) as locked:
            if not locked and held is not None:  # another process is building: keep ours a moment
                slot.checked = now - check_seconds + BUSY_RECHECK_SECONDS
                return held
            if not (path / "meta.json").exists():
                path = build_index(engine, warehouse_dir)
            _prune(warehouse_dir, keep={path})
            slot.index = Bm25Index.load(path)  # under the lock: nobody prunes it while it is read
        slot.checked = now
        return slot.index


def ensure_index(engine: Engine, root: Path | None = None) -> Bm25Index:
    """Checks now and returns the current index, building it if needed (benches and tests)."""
    return current_index(engine, Path(root) if root else default_index_dir(), 0.0)

