"""Parse the bibliography of a LaTeX project: .bib files, else the compiled .bbl / thebibliography.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.bibliography`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import bibtexparser
from bibtexparser import Library
from bibtexparser.middlewares import LatexDecodingMiddleware, RemoveEnclosingMiddleware
from bibtexparser.model import (
    Block,
    DuplicateBlockKeyBlock,
    DuplicateFieldKeyBlock,
    Entry,
    Field,
    ParsingFailedBlock,
)
from pylatexenc.latex2text import LatexNodes2Text

from deepscholar.text.arxiv_ids import BARE_ARXIV_ID_RE, clean_arxiv_id, find_arxiv_id

from .latex_project import LatexProject, find_main_tex, flatten
from .latex_source import brace_group_end, read_tex
from .latex_text import latex_to_text

__all__ = [
    "BibEntry",
    "Bibliography",
    "arxiv_id_from_entry",
    "load_bibliography",
    "parse_bbl",
    "parse_bib_string",
    "parse_bibliography",
]


@dataclass
class BibEntry:
    key: str
    entry_type: str
    title: str | None
    authors: str | None
    year: str | None
    doi: str | None
    eprint: str | None  # version-less arXiv id when the entry has one
    url: str | None
    journal: str | None
    raw_fields: dict[str, str] = field(default_factory=dict)
    source_file: str | None = None


@dataclass
class Bibliography:
    entries: dict[str, BibEntry]
    sources: list[str]  # files read, relative to the project folder
    failures: list[str]  # human-readable notes on blocks that were dropped


# --------------------------------------------------------------------------------------------------
# arXiv identifiers


def arxiv_id_from_entry(entry: BibEntry | dict) -> str | None:
    """Version-less arXiv id of a reference, from whichever field carries it."""
    fields = entry.raw_fields if isinstance(entry, BibEntry) else dict(entry)
    fields = {str(k).lower(): str(v) for k, v in fields.items() if v is not None}
    if isinstance(entry, BibEntry):
        for name, value in (("doi", entry.doi), ("url", entry.url), ("journal", entry.journal)):
            if value and name not in fields:
                fields[name] = value

    prefix = (fields.get("archiveprefix") or fields.get("eprinttype") or "").strip().lower()
    eprint = fields.get("eprint", "").strip()
    if eprint:
        m = BARE_ARXIV_ID_RE.match(eprint)
        if m and (prefix in ("", "arxiv") or eprint.lower().startswith("arxiv")):
            return clean_arxiv_id(m.group("id"))
        found = find_arxiv_id(eprint)
        if found:
            return found
    for name in ("doi", "url", "journal", "booktitle", "note", "howpublished", "volume", "publisher",
                 "pages", "number", "series", "institution", "biburl"):
        found = find_arxiv_id(fields.get(name))
        if found:
            return found
    venue = (fields.get("journal") or fields.get("journaltitle") or fields.get("booktitle") or "").lower()
    if re.search(r"\b(?:corr|arxiv)\b", venue):
        # DBLP style: journal = {CoRR}, volume = {abs/1512.03385}
        for name in ("volume", "number", "pages"):
            m = BARE_ARXIV_ID_RE.match(re.sub(r"^\s*abs/", "", fields.get(name, "")))
            if m:
                return clean_arxiv_id(m.group("id"))
    return None


# --------------------------------------------------------------------------------------------------
# .bib parsing

# Fields that are identifiers or addresses: LaTeX-decoding them would corrupt ``~`` or ``_`` or ``%``.
_RAW_FIELDS = frozenset({"url", "doi", "eprint", "file", "pdf", "link", "biburl", "bibsource", "isbn",
                         "issn", "archiveprefix", "eprinttype", "eprintclass", "primaryclass", "timestamp"})
_ENTRY_START_RE = re.compile(r"@\s*([A-Za-z]+)\s*[{(]\s*([^,\s]*)")


def _field_text(value) -> str:
    return value if isinstance(value, str) else str(value)


def _first_fields(entry: Entry) -> dict[str, str]:
    """Lower-case field names; on duplicates the first value wins, as in BibTeX."""
    out: dict[str, str] = {}
    for f in entry.fields:
        out.setdefault(f.key.lower(), _field_text(f.value))
    return out


def _salvage_unclosed(raw: str) -> list[Entry]:
    """An entry whose closing brace is missing: close it and parse it alone."""
    text = raw.rstrip()
    if not text.startswith("@"):
        return []
    for suffix in ("\n}", "}\n}", "\n)"):
        lib = bibtexparser.parse_string(text + suffix)
        if lib.entries and not lib.failed_blocks:
            return list(lib.entries)
    return []


def _first_field_wins(entry: Entry) -> Entry:
    """bibtexparser reports repeated fields as an error; keep the entry with each field's first value."""
    seen: set[str] = set()
    fields = []
    for f in entry.fields:
        if f.key.lower() not in seen:
            seen.add(f.key.lower())
            fields.append(Field(f.key, f.value))
    fixed = Entry(entry.entry_type, entry.key, fields, start_line=entry.start_line, raw=entry.raw)
    # The error block skipped the parse stack, so its values still carry their braces/quotes.
    lib = RemoveEnclosingMiddleware().transform(Library(blocks=[fixed]))
    return lib.entries[0] if lib.entries else fixed


def parse_bib_string(text: str, source_file: str | None = None) -> Bibliography:
    """Parse one .bib text; malformed entries are salvaged where possible, else reported."""
    lib = bibtexparser.parse_string(text)
    failures: list[str] = []
    entries: list[Entry] = list(lib.entries)
    for block in lib.failed_blocks:
        line = block.start_line + 1 if block.start_line is not None else "?"
        where = f"{source_file or '<bib>'}:{line}"
        if isinstance(block, DuplicateBlockKeyBlock):
            failures.append(f"{where}: duplicate key '{block.key}' ignored (first entry kept)")
            continue
        if isinstance(block, DuplicateFieldKeyBlock) and isinstance(block.ignore_error_block, Entry):
            entries.append(_first_field_wins(block.ignore_error_block))
            failures.append(f"{where}: entry '{block.ignore_error_block.key}' repeats fields; first kept")
            continue
        salvaged = _salvage_unclosed(block.raw or "") if isinstance(block, ParsingFailedBlock) else []
        for entry in salvaged:
            entries.append(entry)
            failures.append(f"{where}: entry '{entry.key}' was not closed; closed and kept")
        if salvaged:
            continue
        m = _ENTRY_START_RE.search(block.raw or "")
        label = f"@{m.group(1)}{{{m.group(2)}" if m else "block"
        failures.append(f"{where}: could not parse {label}: {getattr(block, 'error', '')}".strip())

    unique: dict[str, Entry] = {}
    for entry in entries:
        if entry.key in unique:
            failures.append(f"{source_file or '<bib>'}: duplicate key '{entry.key}' ignored (first kept)")
            continue
        unique[entry.key] = entry
    decoded = _decode(list(unique.values()))
    out = {key: _to_bib_entry(entry, _first_fields(entry), decoded.get(key, {}), source_file)
           for key, entry in unique.items()}
    return Bibliography(entries=out, sources=[source_file] if source_file else [], failures=failures)


def _decode(entries: list[Entry]) -> dict[str, dict[str, str]]:
    """LaTeX-decode the human-readable fields with bibtexparser's middleware (ids and URLs stay raw)."""
    decodable: list[Block] = []
    for entry in entries:
        fields = [Field(k, v) for k, v in _first_fields(entry).items()
                  if k not in _RAW_FIELDS and _NEEDS_DECODING_RE.search(v)]
        decodable.append(Entry(entry.entry_type, entry.key, fields))
    lib = _DECODER.transform(Library(blocks=decodable))
    out = {e.key: {f.key: _field_text(f.value) for f in e.fields} for e in lib.entries}
    return out


class _Decoder(LatexNodes2Text):
    """bibtexparser's decoder slot, filled with our converter.

    The stock decoder builds pylatexenc's default context for every field (slow) and renders ``~`` as a
    no-break space; ours reuses one context, keeps math verbatim and ``\\url`` targets as they are.
    """

    def latex_to_text(self, latex: str, **parse_flags) -> str:
        return latex_to_text(latex)


_DECODER = LatexDecodingMiddleware(decoder=_Decoder())
# Plain values need no LaTeX pass (braces are stripped later anyway); skipping them saves most of the time.
_NEEDS_DECODING_RE = re.compile(r"[\\~$]|--|``|''")


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    text = re.sub(r"[{}]", "", value)
    text = re.sub(r"\s+", " ", text).strip()
    return text or None


def _latex_url(value: str | None) -> str | None:
    if not value:
        return None
    m = re.search(r"\\url\s*\{([^{}]*)\}", value)
    text = m.group(1) if m else value
    text = text.strip().strip("{}").strip()
    return text or None


def _normalise_doi(value: str | None) -> str | None:
    if not value:
        return None
    doi = value.strip().strip("{}").strip()
    doi = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", doi, flags=re.IGNORECASE)
    return doi or None


def _to_bib_entry(entry: Entry, raw_fields: dict[str, str], decoded: dict[str, str],
                  source_file: str | None) -> BibEntry:
    decoded = {**raw_fields, **decoded}
    url = _latex_url(raw_fields.get("url"))
    if url is None:
        for name in ("howpublished", "note"):
            m = re.search(r"\\url\s*\{([^{}]*)\}", raw_fields.get(name, ""))
            if m:
                url = m.group(1).strip()
                break
    year = _clean(decoded.get("year"))
    if not year:
        m = re.search(r"\b(1[89]\d\d|20\d\d)\b", decoded.get("date", ""))
        year = m.group(1) if m else None
    bib = BibEntry(
        key=entry.key,
        entry_type=entry.entry_type.lower(),
        title=_clean(decoded.get("title")),
        authors=_clean(decoded.get("author") or decoded.get("editor")),
        year=year,
        doi=_normalise_doi(raw_fields.get("doi")),
        eprint=None,
        url=url,
        journal=_clean(decoded.get("journal") or decoded.get("journaltitle") or decoded.get("booktitle")),
        raw_fields=raw_fields,
        source_file=source_file,
    )
    bib.eprint = arxiv_id_from_entry(bib)
    return bib


# --------------------------------------------------------------------------------------------------
# .bbl / thebibliography parsing

_BIBITEM_RE = re.compile(r"\\bibitem(?![A-Za-z@])\s*")
_END_THEBIB_RE = re.compile(r"\\end\s*\{thebibliography\}")
_BEGIN_THEBIB_RE = re.compile(r"\\begin\s*\{thebibliography\}\s*(?:\{[^{}]*\})?")
_YEAR_RE = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
_DOI_RE = re.compile(r"\b(10\.\d{4,9}/[^\s{}\\,;]+[^\s{}\\,;.])")
_URL_RE = re.compile(r"https?://[^\s{}\\]+[^\s{}\\.,;]")


def _skip_balanced(text: str, pos: int, open_c: str, close_c: str) -> int | None:
    """Index just past the bracket group opening at ``pos`` (braces nest inside it)."""
    depth = 0
    brace = 0
    i = pos
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            brace += 1
        elif c == "}":
            brace -= 1
        elif brace == 0 and c == open_c:
            depth += 1
        elif brace == 0 and c == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def parse_bbl(text: str, source_file: str | None = None) -> Bibliography:
    """Parse natbib/plain ``thebibliography`` items, or biblatex's ``\\entry`` blocks."""
    if re.search(r"\\entry\s*\{", text) and "\\endentry" in text:
        return _parse_biblatex_bbl(text, source_file)
    begin = _BEGIN_THEBIB_RE.search(text)
    start = begin.end() if begin else 0
    end_m = _END_THEBIB_RE.search(text, start)
    end = end_m.start() if end_m else len(text)
    body = text[start:end]

    items: list[tuple[str, str | None, str]] = []
    failures: list[str] = []
    marks = list(_BIBITEM_RE.finditer(body))
    for i, m in enumerate(marks):
        pos = m.end()
        stop = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        label = None
        if pos < len(body) and body[pos] == "[":
            close = _skip_balanced(body, pos, "[", "]")
            if close is None or close > stop:
                failures.append(f"{source_file or '<bbl>'}: unterminated \\bibitem label")
                continue
            label = body[pos + 1 : close - 1]
            pos = close
        km = re.compile(r"\s*\{([^{}]*)\}").match(body, pos)
        if km is None:
            failures.append(f"{source_file or '<bbl>'}: \\bibitem without a key")
            continue
        items.append((km.group(1).strip(), label, body[km.end() : stop]))

    entries: dict[str, BibEntry] = {}
    for key, label, content in items:
        if key in entries:
            failures.append(f"{source_file or '<bbl>'}: duplicate \\bibitem key '{key}' ignored")
            continue
        entries[key] = _bibitem_entry(key, label, content, source_file)
    return Bibliography(entries=entries, sources=[source_file] if source_file else [], failures=failures)


def _bibitem_entry(key: str, label: str | None, content: str, source_file: str | None) -> BibEntry:
    blocks = [b.strip() for b in re.split(r"\\newblock(?![A-Za-z@])", content)]
    blocks = [b for b in blocks if b]
    texts = [_bbl_text(b) for b in blocks]
    authors = texts[0].rstrip(". ").strip() if texts else None
    # With a single block (no \newblock) authors and title cannot be told apart reliably.
    title = texts[1].rstrip(",. ").strip() if len(texts) > 1 else None
    if title and len(texts) == 2:
        # natbib puts the year after the title when nothing else follows (misc/arXiv items).
        title = re.sub(r",\s*(?:1[89]|20)\d\d[a-z]?$", "", title).strip()
    venue = ", ".join(texts[2:]) if len(texts) > 2 else None
    if venue:
        venue = re.sub(r"^In\s+", "", venue).rstrip(". ").strip()

    year = None
    if label:
        ym = _YEAR_RE.search(label)
        year = ym.group(1) if ym else None
    if year is None:
        years = _YEAR_RE.findall(" ".join(texts))
        year = years[-1] if years else None

    url = None
    um = re.search(r"\\(?:url|href)\s*\{([^{}]*)\}", content) or _URL_RE.search(content)
    if um:
        url = (um.group(1) if um.lastindex else um.group(0)).strip()
    doi = None
    dm = re.search(r"\\doi\s*\{([^{}]*)\}", content) or _DOI_RE.search(content)
    if dm:
        doi = _normalise_doi(dm.group(1))
    plain = " ".join(texts)
    raw_fields = {"bibitem_label": label or "", "text": plain}
    if venue:
        raw_fields["venue"] = venue
    entry = BibEntry(
        key=key,
        entry_type="bibitem",
        title=title or None,
        authors=authors or None,
        year=year,
        doi=doi,
        eprint=None,
        url=url,
        journal=venue,
        raw_fields=raw_fields,
        source_file=source_file,
    )
    entry.eprint = find_arxiv_id(content) or arxiv_id_from_entry(entry)
    return entry


def _bbl_text(latex: str) -> str:
    latex = re.sub(
        r"\{\\natexlab\{([^{}]*)\}\}|\\natexlab\{([^{}]*)\}", lambda m: m.group(1) or m.group(2) or "", latex
    )
    latex = re.sub(r"\\penalty\d*|\\providecommand", " ", latex)
    return latex_to_text(latex)


def _parse_biblatex_bbl(text: str, source_file: str | None) -> Bibliography:
    entries: dict[str, BibEntry] = {}
    failures: list[str] = []
    for m in re.finditer(r"\\entry\s*\{([^{}]+)\}\s*\{([^{}]+)\}(.*?)\\endentry", text, re.DOTALL):
        key, etype, body = m.group(1).strip(), m.group(2).strip().lower(), m.group(3)
        fields: dict[str, str] = {}
        for fm in re.finditer(r"\\field\s*\{(\w+)\}\s*\{", body):
            close = brace_group_end(body, fm.end() - 1)
            if close is not None:
                fields.setdefault(fm.group(1).lower(), body[fm.end() : close - 1])
        for vm in re.finditer(r"\\verb\s*\{(\w+)\}\s*\n?\s*\\verb\s(.*?)\n?\s*\\endverb", body, re.DOTALL):
            fields.setdefault(vm.group(1).lower(), vm.group(2).strip())
        names = []
        nm = re.search(r"\\name\s*\{(?:author|editor)\}\s*\{\d+\}\s*\{[^{}]*\}\s*\{", body)
        if nm:
            close = brace_group_end(body, nm.end() - 1)
            block = body[nm.end() : close - 1] if close else ""
            # Each name is ``{{<options>}{family={..}, given={..}, ...}}``.
            for part in re.split(r"\{\{[^{}]*\}\{", block)[1:]:
                fam = re.search(r"(?<![a-z])family=\{((?:[^{}]|\{[^{}]*\})*)\}", part)
                giv = re.search(r"(?<![a-z])given=\{((?:[^{}]|\{[^{}]*\})*)\}", part)
                name = " ".join(x for x in (giv.group(1) if giv else "", fam.group(1) if fam else "") if x)
                name = re.sub(r"\\bibnamedelim[a-z]|\\bibinitdelim", " ", name)
                if name:
                    names.append(_clean(latex_to_text(name)) or name)
        if key in entries:
            failures.append(f"{source_file or '<bbl>'}: duplicate \\entry key '{key}' ignored")
            continue
        year = fields.get("year")
        if not year:
            ym = _YEAR_RE.search(fields.get("date", ""))
            year = ym.group(1) if ym else None
        entry = BibEntry(
            key=key,
            entry_type=etype,
            title=_clean(latex_to_text(fields["title"])) if "title" in fields else None,
            authors=" and ".join(names) or None,
            year=year,
            doi=_normalise_doi(fields.get("doi")),
            eprint=None,
            url=fields.get("url"),
            journal=_clean(latex_to_text(fields.get("journaltitle") or fields.get("booktitle") or "")),
            raw_fields=fields,
            source_file=source_file,
        )
        entry.eprint = arxiv_id_from_entry(entry)
        entries[key] = entry
    return Bibliography(entries=entries, sources=[source_file] if source_file else [], failures=failures)


# --------------------------------------------------------------------------------------------------
# Project-level entry point

_BIB_CMD_RE = re.compile(
    r"\\(?P<cmd>bibliography|addbibresource|addglobalbib|addsectionbib|nobibliography)(?![A-Za-z@])\s*"
    r"(?:\[[^\]]*\]\s*)?\{(?P<arg>[^{}]*)\}"
)


def _bib_names(live: str) -> list[str]:
    names: list[str] = []
    for m in _BIB_CMD_RE.finditer(live):
        if m.group("cmd") in ("bibliography", "nobibliography"):
            parts = [p.strip() for p in m.group("arg").split(",")]
            names.extend(p if p.lower().endswith(".bib") else f"{p}.bib" for p in parts if p)
        else:
            arg = m.group("arg").strip()
            if arg:
                names.append(arg)
    return list(dict.fromkeys(names))


def _rel(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def _find_file(root: Path, main_dir: Path, name: str) -> Path | None:
    for base in (main_dir, root):
        cand = base / name
        if cand.is_file():
            try:
                cand.resolve().relative_to(root.resolve())
            except ValueError:
                continue
            return cand
    return None


def _all_files(root: Path, suffix: str) -> list[Path]:
    return sorted(
        p for p in root.rglob(f"*{suffix}")
        if p.is_file() and not p.is_symlink()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def load_bibliography(
    project_dir: Path, main_tex: str | None = None, *, project: LatexProject | None = None
) -> Bibliography:
    """Entries of the project's bibliography plus the files read and what was dropped.

    Pass ``project`` to reuse .tex files another step has already read.
    """
    root = Path(project_dir)
    project = project or LatexProject(root)
    if main_tex is None:
        main_tex = find_main_tex(root, project)
    live = flatten(project, main_tex).live if main_tex else ""
    main_dir = (root / main_tex).parent if main_tex else root

    bib_paths: list[Path] = []
    for name in _bib_names(live):
        found = _find_file(root, main_dir, name)
        if found is not None and found not in bib_paths:
            bib_paths.append(found)

    result = Bibliography(entries={}, sources=[], failures=[])
    if not bib_paths and _BEGIN_THEBIB_RE.search(live):
        # The bibliography is typed into the document itself: that is what LaTeX prints.
        _merge(result, parse_bbl(live, main_tex))
        return result
    if not bib_paths and main_tex and (root / main_tex).with_suffix(".bbl").is_file():
        # Named .bib files are missing (typical of arXiv uploads): the compiled .bbl is authoritative,
        # more so than unrelated .bib files that may lie around (template samples, old versions).
        bbl = (root / main_tex).with_suffix(".bbl")
        _merge(result, parse_bbl(read_tex(bbl), _rel(bbl, root)))
        return result
    if not bib_paths:
        bib_paths = _all_files(root, ".bib")
    for path in bib_paths:
        _merge(result, parse_bib_string(read_tex(path), _rel(path, root)))
    if not bib_paths:
        for path in _all_files(root, ".bbl")[:1]:
            _merge(result, parse_bbl(read_tex(path), _rel(path, root)))
    return result


def _merge(into: Bibliography, part: Bibliography) -> None:
    into.sources.extend(part.sources)
    into.failures.extend(part.failures)
    for key, entry in part.entries.items():
        if key in into.entries:
            into.failures.append(f"{entry.source_file}: key '{key}' already defined in "
                                 f"{into.entries[key].source_file}; first kept")
            continue
        into.entries[key] = entry


def parse_bibliography(project_dir: Path, main_tex: str | None = None) -> dict[str, BibEntry]:
    """Key -> entry for the project's bibliography (see :func:`load_bibliography` for failures)."""
    return load_bibliography(project_dir, main_tex).entries
