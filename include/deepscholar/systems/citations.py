"""Citation parsing shared by the importers, report storage and the metrics.

Every report ends up as markdown whose numbered markers ([3], [2][7], [2, 7], [2-4]) refer to sources by
their 1-based idx. Systems write these in many ways (arXiv links instead of numbers, a numbered reference
list at the end, 0-based passages), so the rules for reading them live here once: the statistics stored
with a report and the sentences the verifiability judges see must agree on what a citation is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from deepscholar.text import ARXIV_NEW_ID_RE, ARXIV_OLD_ID_RE, strip_arxiv_version

__all__ = [
    "CitationStats",
    "ParsedReference",
    "Sentence",
    "arxiv_id_from_text",
    "arxiv_links_to_numbers",
    "citation_numbers",
    "citation_stats",
    "parse_reference_list",
    "reference_title",
    "renumber_citations",
    "split_sentences",
]

# ------------------------------------------------------------------------------------------ markers

_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2212"
# Numbers have at most three digits: "[2020]" and "[2019-2021]" are years, not citations.
_ITEM = rf"\d{{1,3}}(?:\s*[{_DASHES}]\s*\d{{1,3}})?(?!\d)"
# A marker group: [3], [2, 7], [2; 7], [2-4], [2–4], and the escaped \[3\] markdown writers produce.
_MARKER_RE = re.compile(rf"\\?\[\s*(?P<body>{_ITEM}(?:\s*[,;]\s*{_ITEM})*)\s*\\?\]")
_ITEM_RE = re.compile(rf"(?P<lo>\d{{1,3}})(?:(?P<sep>\s*[{_DASHES}]\s*)(?P<hi>\d{{1,3}}))?")
# A range longer than this is a year span or a typo, not a citation of every number in between.
_MAX_RANGE = 100


def _group_numbers(body: str) -> list[int] | None:
    numbers: list[int] = []
    for m in _ITEM_RE.finditer(body):
        lo = int(m.group("lo"))
        if m.group("hi") is None:
            numbers.append(lo)
            continue
        hi = int(m.group("hi"))
        if hi < lo or hi - lo > _MAX_RANGE:
            return None
        numbers.extend(range(lo, hi + 1))
    return numbers


def citation_numbers(text: str) -> list[int]:
    """Distinct cited numbers in order of first appearance; [a] and link labels that aren't numbers are not citations."""
    seen: dict[int, None] = {}
    for m in _MARKER_RE.finditer(text or ""):
        for n in _group_numbers(m.group("body")) or []:
            seen.setdefault(n, None)
    return list(seen)


def renumber_citations(text: str, mapping: Callable[[int], int | None]) -> str:
    """Rewrite every marker number through `mapping` (None keeps it); used for 0-based systems."""

    def fix_group(m: re.Match) -> str:
        if _group_numbers(m.group("body")) is None:
            return m.group(0)

        def fix_item(item: re.Match) -> str:
            lo = mapping(int(item.group("lo")))
            out = str(lo if lo is not None else item.group("lo"))
            if item.group("hi") is not None:
                hi = mapping(int(item.group("hi")))
                out += item.group("sep") + str(hi if hi is not None else item.group("hi"))
            return out

        body = _ITEM_RE.sub(fix_item, m.group("body"))
        return m.group(0).replace(m.group("body"), body, 1)

    return _MARKER_RE.sub(fix_group, text)


# ------------------------------------------------------------------------------------ arXiv links

_URL_RE = re.compile(r"https?://[^\s<>\"')\]]+")
_ARXIV_URL_RE = re.compile(r"arxiv\.org/(?:abs|pdf|html)/(?P<id>[^\s?#)\]]+)", re.IGNORECASE)
# "arXiv:2308.10363", "arXiv.2308.10363" (DOIs 10.48550/arXiv.…), "arXiv 2308.10363".
_ARXIV_MENTION_RE = re.compile(r"\barxiv\s*[:.]\s*(?P<tok>[^\s,;)\]]+)|\barxiv\s+(?P<bare>\d{4}\.\d{4,5}(?:v\d+)?)\b",
                               re.IGNORECASE)
_MD_ARXIV_LINK_RE = re.compile(
    r"\[(?P<label>[^\[\]]*)\]\((?P<url>\s*<?https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/[^)\s>]+>?\s*)\)",
    re.IGNORECASE)
# After links became [n]: "\[[1]\]", "[[1]]", "\[[1], [2]\]" collapse to plain markers.
_WRAPPED_MARKERS_RE = re.compile(r"\\?\[\s*(?P<inner>\[\d+\](?:\s*[,;]?\s*\[\d+\])*)\s*\\?\]")


def _parse_id(token: str) -> str | None:
    token = token.strip().strip("<>").rstrip(".*_`'\"").removesuffix(".pdf")
    base, _ = strip_arxiv_version(token)
    if ARXIV_NEW_ID_RE.fullmatch(base) or ARXIV_OLD_ID_RE.fullmatch(base):
        return base
    return None


def arxiv_id_from_text(text: str | None) -> tuple[str | None, str | None]:
    """(version-less id, problem): the arXiv id a URL or reference names, or why the named one is unusable."""
    text = text or ""
    bad: list[str] = []
    for m in _ARXIV_URL_RE.finditer(text):
        if found := _parse_id(m.group("id")):
            return found, None
        bad.append(m.group("id"))
    for m in _ARXIV_MENTION_RE.finditer(text):
        tok = m.group("tok") or m.group("bare")
        if found := _parse_id(tok):
            return found, None
        if re.search(r"\d", tok) or re.search(r"[Xx?]{3,}", tok):  # "arXiv:2306.XXXXX", not "arXiv: A survey"
            bad.append(tok.rstrip(".*_`"))
    if bad:
        return None, f"names no resolvable arXiv id ({bad[0]!r})"
    return None, None


def arxiv_links_to_numbers(markdown: str) -> tuple[str, dict[int, str]]:
    """Replace arXiv markdown links by [n] (one n per distinct paper, first appearance first).

    deepscholar-base cites as `[[Author 'YYYY-MM-DD](http://arxiv.org/abs/XXXX.XXXXXvN)]`; numbering them
    turns such a report into the common form. Returns the new text and n -> version-less arXiv id.
    """
    numbers: dict[str, int] = {}

    def repl(m: re.Match) -> str:
        arxiv_id = _parse_id(_ARXIV_URL_RE.search(m.group("url")).group("id"))
        if arxiv_id is None:
            return m.group(0)
        n = numbers.setdefault(arxiv_id, len(numbers) + 1)
        return f"[{n}]"

    text = _MD_ARXIV_LINK_RE.sub(repl, markdown or "")

    def unwrap(m: re.Match) -> str:
        inner = re.findall(r"\[(\d+)\]", m.group("inner"))
        return "[" + ", ".join(inner) + "]"

    text = _WRAPPED_MARKERS_RE.sub(unwrap, text)
    return text, {n: a for a, n in numbers.items()}


# ------------------------------------------------------------------------------- reference lists

_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_REF_HEADING_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:\d+\.?\s+)?"
    r"(?:references?|sources?|bibliography|works\s+cited|cited\s+works|citations|reference\s+list|literature\s+cited)"
    r"\s*:?\s*(?:\*\*|__)?\s*:?\s*$", re.IGNORECASE)
_REF_ENTRY_RE = re.compile(r"^\s{0,3}(?:[-*+]\s+)?(?:\\?\[\s*(?P<b>\d{1,4})\s*\\?\]|(?P<d>\d{1,4})[.)](?=\s))\s*")
_YEAR_RE = re.compile(r"\b(?:19|20)\d{2}\b")


@dataclass
class ParsedReference:
    """One entry of a report's own numbered reference list."""

    number: int
    title: str
    arxiv_id: str | None = None  # version-less; None when the entry names none or a placeholder
    url: str | None = None
    text: str = ""  # the entry as written, marker removed
    problem: str | None = None  # why the entry cannot be resolved although it claims an id
    doi: str | None = None

    @property
    def resolvable(self) -> bool:
        return self.problem is None and bool(self.arxiv_id or self.url or self.title)


def _entry_start(line: str) -> re.Match | None:
    return _REF_ENTRY_RE.match(line)


def _looks_bibliographic(text: str) -> bool:
    return bool(_URL_RE.search(text) or re.search(r"arxiv", text, re.I) or _YEAR_RE.search(text))


def _blocks(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """[a, b) ranges of consecutive non-blank lines."""
    out, i = [], start
    while i < end:
        if not lines[i].strip():
            i += 1
            continue
        j = i
        while j < end and lines[j].strip():
            j += 1
        out.append((i, j))
        i = j
    return out


def _reference_spans(lines: list[str]) -> list[tuple[int, int]]:
    """[start, end) line ranges that are reference lists: a References/Sources heading up to the next
    heading, and a trailing run of numbered entries at the end of the text."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if _REF_HEADING_RE.match(lines[i]):
            j = i + 1
            while j < len(lines) and not _HEADING_RE.match(lines[j]) and not _REF_HEADING_RE.match(lines[j]):
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    covered = spans[-1][1] if spans else 0
    # Without a heading: trailing blocks whose first line is a numbered entry and whose other lines are
    # entries or their continuations. "1." lists must look bibliographic, or they are the body's own lists.
    blocks = _blocks(lines, covered, len(lines))
    run: list[tuple[int, int]] = []
    for a, b in reversed(blocks):
        if _entry_start(lines[a]) is None or _HEADING_RE.match(lines[a]):
            break
        run.insert(0, (a, b))
    if not run:
        return spans
    starts = [lines[k] for a, b in run for k in range(a, b) if _entry_start(lines[k])]
    dotted = [x for x in starts if _entry_start(x).group("d") is not None]
    if any(not _looks_bibliographic(x) for x in dotted):
        return spans
    if len(starts) < 2 and not all(_looks_bibliographic(x) for x in starts):
        return spans
    if not any(x.strip() for x in lines[covered:run[0][0]]) and not spans:
        return spans  # the whole text is a numbered list: that is a body, not references
    spans.append((run[0][0], run[-1][1]))
    return spans


def _entries(lines: list[str]) -> list[tuple[int, str]]:
    """(number, text) of each entry; an entry's wrapped lines join it until a blank line."""
    numbers: list[int] = []
    texts: list[str] = []
    open_entry = False
    for line in lines:
        m = _entry_start(line)
        if m is not None:
            numbers.append(int(m.group("b") or m.group("d")))
            texts.append(line[m.end():].strip())
            open_entry = True
        elif line.strip() and open_entry and not _HEADING_RE.match(line):
            texts[-1] = f"{texts[-1]} {line.strip()}".strip()
        elif not line.strip():
            open_entry = False
    return list(zip(numbers, texts, strict=True))


def reference_title(entry: str) -> str:
    """Best-effort title of a bibliography entry (APA, ACL, `Title (2023) URL`, `Title. *arXiv:…*`)."""
    s = re.sub(r"\[([^\[\]]*)\]\((?:[^()\s]+)\)", r"\1", entry or "")
    s = _URL_RE.sub(" ", s)
    s = re.sub(r"\(\s*\)|<\s*>", " ", s)
    s = re.sub(r"\barxiv(?:\s+preprint)?\s*[:.]?\s*[^\s,;)\]]*\d[^\s,;)\]]*", " ", s, flags=re.I)
    s = re.sub(r"\bdoi\s*:\s*\S+", " ", s, flags=re.I)
    s = s.replace("**", "").replace("__", "").replace("*", "").replace("`", "")
    s = re.sub(r"^\s*Document\s+\d+\s*:\s*", "", s.strip(), flags=re.I)
    s = re.sub(r"\s+", " ", s).strip(" \t.,;:-")
    if not s:
        return ""
    quoted = re.search(r"[\"\u201c]([^\"\u201d]{8,})[\"\u201d]", s)
    if quoted:
        return quoted.group(1).strip(" ,.")
    # APA: "Saez, E. (2010). Title. Journal…"
    apa = re.search(r"\((?:19|20)\d{2}[a-z]?(?:,[^)]*)?\)\s*[.,:]?\s+(?P<t>.+?[?!]?)(?:(?<=[?!])\s|\.\s|\.$|$)", s)
    if apa and len(apa.group("t").split()) >= 2:
        return apa.group("t").strip(" ,.")
    # "Title (2023)" with the year last (URLs already removed).
    tail = re.match(r"(?P<t>.+?)\s*\((?:19|20)\d{2}[a-z]?\)\s*[.,]?\s*$", s)
    if tail:
        return tail.group("t").strip(" ,.")
    # ACL: "Smith and Doe. 2020. Title. In Proceedings…"
    acl = re.search(r"(?:^|\.\s)(?:19|20)\d{2}[a-z]?\.\s+(?P<t>.+?)(?:\.\s|\.$|$)", s)
    if acl and len(acl.group("t").split()) >= 2:
        return acl.group("t").strip(" ,.")
    first = re.split(r"(?<=\w\w)\.\s|(?<=[)\]])\.\s", s, maxsplit=1)[0]
    return first.strip(" ,.")[:500]


# "doi:10.1145/3442188.3445922", "DOI 10.18653/v1/…", "https://doi.org/10.…" (a placeholder "10.xxxx/…" too).
_DOI_RE = re.compile(r"(?:\bdoi\s*[:=]?\s*|doi\.org/)(?P<doi>10\.[^\s/]+/[^\s,;)\]>]+)", re.IGNORECASE)


def _doi(body: str) -> tuple[str | None, str | None]:
    """(DOI, problem) named by a reference entry; a DOI with a placeholder ("10.xxxx/…") names nothing."""
    m = _DOI_RE.search(body)
    if m is None:
        return None, None
    doi = m.group("doi").rstrip(".*_`'\"")
    if not re.fullmatch(r"10\.\d{4,9}/\S+", doi) or re.search(r"[Xx?]{3,}", doi.split("/", 1)[1]):
        return None, f"names no resolvable DOI ({doi!r})"
    return doi, None


def _parse_entry(number: int, body: str) -> ParsedReference:
    urls = [u.rstrip(".,;*_`") for u in _URL_RE.findall(body)]
    arxiv_id, problem = arxiv_id_from_text(body)
    url = next((u for u in urls if _ARXIV_URL_RE.search(u)), urls[0] if urls else None)
    doi, doi_problem = _doi(body)
    if arxiv_id is not None:
        problem = None
    elif doi is not None and problem is None:
        url = url or f"https://doi.org/{doi}"  # a DOI names the paper as well as a URL does
    problem = problem or (doi_problem if arxiv_id is None and not url else None)
    return ParsedReference(number=number, title=reference_title(body), arxiv_id=arxiv_id, url=url, text=body,
                           problem=problem, doi=doi)


def parse_reference_list(markdown: str) -> dict[int, ParsedReference]:
    """The numbered reference list at the end of a report (the last one when a report has several)."""
    lines = (markdown or "").splitlines()
    spans = _reference_spans(lines)
    if not spans:
        return {}
    start, end = spans[-1]
    refs: dict[int, ParsedReference] = {}
    for number, body in _entries(lines[start:end]):
        if number not in refs:  # a repeated number keeps its first entry
            refs[number] = _parse_entry(number, body)
    return refs


# ----------------------------------------------------------------------------------- sentences


@dataclass
class Sentence:
    index: int
    text: str
    citations: list[int] = field(default_factory=list)


# Never end a sentence: "et al.", "e.g.", "Dr.".
_ABBREVIATIONS = {
    "al", "e.g", "i.e", "eg", "ie", "cf", "vs", "viz", "approx", "resp", "dr", "mr", "mrs", "ms", "prof", "jr",
    "sr", "st", "ca", "u.s", "u.k", "e.u", "a.k.a", "ph.d", "incl", "esp", "ed", "eds", "et", "dept", "univ",
}
# End no sentence when a number follows: "Fig. 3", "Eq. (2)", "No. 5".
_NUMBERED_ABBREVIATIONS = {
    "fig", "figs", "eq", "eqs", "sec", "secs", "no", "nos", "vol", "vols", "pp", "p", "ch", "chap", "ref", "refs",
    "tab", "alg", "thm", "def", "prop", "lemma", "appx", "app", "art", "para",
}
_LIST_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")  # nested items (any indent) too
_RULE_RE = re.compile(r"^\s{0,3}(?:[-*_]\s*){3,}$|^\s*\|?\s*:?-{3,}")
_TAG_LINE_RE = re.compile(r"^\s*</?[A-Za-z_][\w-]*>\s*$")
_TERMINAL_RE = re.compile(r"[.!?]+[\"'\u201d\u2019)]*")
_TRAILING_MARKERS_RE = re.compile(rf"(?:\s*{_MARKER_RE.pattern})+")
_STARTER_RE = re.compile(r"[\"'\u201c\u2018(\[*_`A-Z0-9]|[^\x00-\x7f]")


def _is_abbreviation(before: str, after: str) -> bool:
    token = re.search(r"(\S+)$", before)
    if not token:
        return False
    word = token.group(1).lstrip("([\"'\u201c*_").lower()
    if word in _ABBREVIATIONS or (word in _NUMBERED_ABBREVIATIONS and re.match(r"\(?\d", after)):
        return True
    return bool(re.fullmatch(r"[a-z]", word)) and token.group(1)[-1:].isupper()  # an initial: "J. Smith"


def _split_paragraph(paragraph: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _TERMINAL_RE.finditer(paragraph):
        end = m.end()
        trailing = _TRAILING_MARKERS_RE.match(paragraph, end)
        if trailing:  # "stability.[1] Traditional": markers after the stop belong to the sentence
            end = trailing.end()
        rest = paragraph[end:]
        if rest and not rest[0].isspace():
            continue
        newline = rest.lstrip(" \t").startswith("\n")
        nxt = rest.lstrip()
        if not nxt:
            continue
        if not newline:
            if not _STARTER_RE.match(nxt):
                continue
            if m.group(0).rstrip("\"'\u201d\u2019)") == "." and _is_abbreviation(paragraph[:m.start()], nxt):
                continue
        out.append(paragraph[start:end])
        start = end
    out.append(paragraph[start:])
    # A line ending with ":" introduces what follows on the next line: that is a boundary too.
    pieces: list[str] = []
    for chunk in out:
        pieces.extend(re.split(r"(?<=:)[ \t]*\n", chunk))
    return [" ".join(p.split()) for p in pieces if re.search(r"\w", _MARKER_RE.sub("", p))]


_SETEXT_RE = re.compile(r"^\s{0,3}(?:=+|-+)\s*$")
_QUOTE_RE = re.compile(r"^\s{0,3}(?:>\s?)+")
_TABLE_CELL_SPLIT_RE = re.compile(r"(?<!\\)\|")
_TABLE_DELIMITER_CELL_RE = re.compile(r"^\s*:?-+:?\s*$")


def _table_cells(line: str) -> list[str] | None:
    """The cells of a pipe-table line (outer pipes optional, `\\|` escapes a pipe); None without a pipe."""
    if not _TABLE_CELL_SPLIT_RE.search(line):
        return None
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    return [c.strip().replace("\\|", "|") for c in _TABLE_CELL_SPLIT_RE.split(text)]


def _is_table_delimiter(line: str) -> bool:
    """| --- | :---: | (the row under a table's header)."""
    cells = _table_cells(line)
    return bool(cells) and all(_TABLE_DELIMITER_CELL_RE.match(c) for c in cells)


def _is_heading_like(lines: list[str]) -> bool:
    """A short single line without a full stop or citation ("Related Works", "**Methods**")."""
    return (len(lines) == 1 and len(lines[0].split()) <= 10 and not re.search(r"[.!?:]\W*$", lines[0])
            and not _MARKER_RE.search(lines[0]))


def _statement_blocks(markdown: str) -> list[tuple[str, bool]]:
    """(text, is_table_row) blocks of a report body: prose blocks are split into sentences, rows are not."""
    lines = (markdown or "").splitlines()
    skip: set[int] = set()
    for a, b in _reference_spans(lines):
        skip.update(range(a, b))
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    in_fence = False
    in_table = False

    def flush():
        nonlocal current
        if current and not _is_heading_like(current):
            blocks.append(("\n".join(current), False))
        current = []

    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            flush()
            continue
        if in_fence or i in skip:
            flush()
            continue
        # Tables: the header row (the line above a delimiter row) and the delimiter are no statements;
        # each body row is one, its non-empty cells joined by "; ".
        cells = _table_cells(line)
        header = cells is not None and i + 1 < len(lines) and _is_table_delimiter(lines[i + 1])
        if header or (cells is not None and _is_table_delimiter(line)):
            flush()
            in_table = True
            continue
        if cells is not None and (in_table or line.lstrip().startswith("|")):
            flush()
            row = "; ".join(c for c in cells if c)
            if re.search(r"\w", _MARKER_RE.sub("", row)):
                blocks.append((" ".join(row.split()), True))
            continue
        in_table = False
        if len(current) == 1 and _SETEXT_RE.match(line) and not _LIST_ITEM_RE.match(lines[i - 1]):
            current = []  # "Title" underlined with === or ---: a heading
            continue
        if _HEADING_RE.match(line) or _RULE_RE.match(line) or _TAG_LINE_RE.match(line):
            flush()
            continue
        line = _QUOTE_RE.sub("", line)
        if not line.strip():
            flush()
            continue
        if _LIST_ITEM_RE.match(line):
            flush()
            line = _LIST_ITEM_RE.sub("", line, count=1)
        current.append(line.strip())
    flush()
    return blocks


# Numbered markers ([3], [2][7], [2, 7], [2-4], [2–4], \[3\]) with the space before them.
_NUMBER_MARKER_RE = re.compile(r"\s*\\?\[\s*\d{1,3}(?:\s*[-\u2010-\u2014\u2212,;]\s*\d{1,3})*\s*\\?\]")


def strip_citation_numbers(text: str) -> str:
    """A sentence as a judge or an embedding should read it: numbered markers are noise there."""
    text = _NUMBER_MARKER_RE.sub("", text or "")
    text = re.sub(r"\s+([.,;:!?)])", r"\1", text)
    return " ".join(text.split())


def split_sentences(markdown: str) -> list[Sentence]:
    """The statements of a report body, in order, with their cited numbers: the one definition of a
    "sentence" for every sentence-level metric (citation precision, claim coverage, nugget coverage and
    organisation under the local judge) and for the citation counts stored with each report.

    - Prose: paragraphs (blank-line separated) are split at sentence ends (". ", "! ", "? "), except after
      abbreviations ("et al.", "e.g.", "Fig. 3") and initials; markers right after the stop ("... work.[3]")
      belong to the sentence before; a line ending with ":" ends a statement too.
    - Headings are not statements: "#" headings, lines underlined with === or ---, and a paragraph that is
      one short line (at most 10 words) with no final punctuation and no citation ("**Methods**").
    - Lists: each item ("-", "*", "+", "1.", "1)"; nested too) is its own paragraph, split like prose;
      indented continuation lines belong to the item.
    - Tables: each body row is one statement, its non-empty cells joined by "; " (however many sentences a
      cell holds); the header row and the delimiter row (| --- |) are not statements. Lines starting with
      "|" count as rows without a delimiter too.
    - Block quotes are prose without their ">" markers.
    - Dropped: fenced code blocks (``` or ~~~), horizontal rules, lone HTML/agent tag lines, the numbered
      reference list(s), and any piece with no word character once citation markers are removed.
    """
    sentences: list[Sentence] = []
    for block, is_row in _statement_blocks(markdown):
        for text in ([block] if is_row else _split_paragraph(block)):
            sentences.append(Sentence(index=len(sentences), text=text, citations=citation_numbers(text)))
    return sentences


# ------------------------------------------------------------------------------------ statistics


@dataclass(frozen=True)
class CitationStats:
    n_citations: int  # (sentence, cited number) pairs
    n_distinct: int
    n_unresolved: int  # distinct cited numbers without a usable source
    unresolved: tuple[int, ...] = ()


def _attr(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


def citation_stats(text: str, sources: Iterable[Any]) -> CitationStats:
    """Counts stored with every report; a cited number is unresolved without a source that names anything.

    Sources the system only retrieved (`cited` false) never resolve a number."""
    by_idx = {}
    for s in sources or []:
        if _attr(s, "cited") is not False:
            by_idx.setdefault(_attr(s, "idx"), s)
    pairs = 0
    distinct: dict[int, None] = {}
    for sentence in split_sentences(text or ""):
        pairs += len(sentence.citations)
        for n in sentence.citations:
            distinct.setdefault(n, None)
    unresolved = tuple(n for n in distinct if n not in by_idx or not any(
        (_attr(by_idx[n], k) or "").strip() for k in ("arxiv_id", "url", "title")))
    return CitationStats(n_citations=pairs, n_distinct=len(distinct), n_unresolved=len(unresolved),
                         unresolved=unresolved)
