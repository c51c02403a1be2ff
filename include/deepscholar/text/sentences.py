"""Sentences, two ways: a human related-work section, and a system's report.

`split_exemplar_sentences` splits cleaned related-work text (``[@key]`` markers, LaTeX-born headings and
hard-wrapped lines) and plain prose such as abstracts into strings. `split_report_sentences` splits a
report's markdown (lists, tables, quotes, a reference list, [n] markers) into `Sentence`s with their
cited numbers. The two differ on purpose (abbreviation lists, what a heading is) and are kept apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from deepscholar.text.markers import LOOSE_CITATION_MARKER_RE
from deepscholar.text.report_markup import (
    CITATION_GROUP_RE,
    MARKDOWN_HEADING_RE,
    citation_numbers,
    reference_spans,
)

__all__ = ["Sentence", "split_exemplar_sentences", "split_report_sentences"]

# --- exemplar (human related-work) text -------------------------------------------------------------

# A marker placed after the full stop still belongs to the sentence before it.
_MARKER_AFTER_STOP_RE = re.compile(r"([.!?])[~\s]*(" + LOOSE_CITATION_MARKER_RE.pattern + r")")
_EXEMPLAR_HEADING_RE = re.compile(r"^\s*(#+\s|\\(?:sub)*section\*?\{|\\paragraph\*?\{)")
_EXEMPLAR_BOUNDARY_RE = re.compile(r"[.!?]+[\"')\]]*\s+(?=[\"'(\[“]?[A-Z0-9])")
# Words whose trailing full stop does not end a sentence ("et al.", "e.g.", "Fig.").
_EXEMPLAR_ABBREVIATIONS = frozenset({
    "al", "e.g", "i.e", "etc", "vs", "cf", "fig", "figs", "eq", "eqs", "sec", "secs", "ref", "refs",
    "no", "vol", "pp", "resp", "approx", "dr", "mr", "ms", "prof", "inc", "ltd", "jr", "sr", "ch",
})


def _ends_with_abbreviation(text: str) -> bool:
    words = text.split()
    last = words[-1].lower().lstrip("(\"'") if words else ""
    return last in _EXEMPLAR_ABBREVIATIONS or (len(last) == 1 and last.isalpha())


def _marker_before_stop(m: re.Match) -> str:
    if _ends_with_abbreviation(m.string[:m.start()]):  # "Smith et al. [@s]" keeps its marker where it is
        return m.group(0)
    return f" {m.group(2)}{m.group(1)}"


def split_exemplar_sentences(text: str) -> list[str]:
    """Sentences of a human related-work section (markers kept); headings dropped, hard-wrapped lines
    re-joined. Plain prose (an abstract) splits the same way."""
    sentences = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [ln.strip() for ln in block.split("\n") if ln.strip() and not _EXEMPLAR_HEADING_RE.match(ln)]
        paragraph = _MARKER_AFTER_STOP_RE.sub(_marker_before_stop, " ".join(lines))
        start = 0
        for m in _EXEMPLAR_BOUNDARY_RE.finditer(paragraph):
            if _ends_with_abbreviation(paragraph[start:m.start()]):
                continue
            sentences.append(paragraph[start:m.end()].strip())
            start = m.end()
        if paragraph[start:].strip():
            sentences.append(paragraph[start:].strip())
    return sentences


# --- system reports ----------------------------------------------------------------------------------


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
_TRAILING_MARKERS_RE = re.compile(rf"(?:\s*{CITATION_GROUP_RE.pattern})+")
_STARTER_RE = re.compile(r"[\"'\u201c\u2018(\[*_`A-Z0-9]|[^\x00-\x7f]")


def _is_abbreviation(before: str, after: str) -> bool:
    token = re.search(r"(\S+)$", before)
    if not token:
        return False
    word = token.group(1).lstrip("([\"'\u201c*_").lower()
    if word in _ABBREVIATIONS or (word in _NUMBERED_ABBREVIATIONS and re.match(r"\(?\d", after)):
        return True
    return bool(re.fullmatch(r"[a-z]", word)) and token.group(1)[-1:].isupper()  # an initial: "J. Smith"


_SPACE_RE = re.compile(r"\s*")
_NEWLINE_NEXT_RE = re.compile(r"[ \t]*\n")
_LOOKBACK = 80  # characters before a stop that _is_abbreviation reads: a word longer is no abbreviation


def _split_paragraph(paragraph: str) -> list[str]:
    """Every check at a stop reads a bounded window around it, never the rest of the paragraph: linear in
    its length (a report of one 200,000-character paragraph splits in well under a second)."""
    out: list[str] = []
    start = 0
    for m in _TERMINAL_RE.finditer(paragraph):
        end = m.end()
        trailing = _TRAILING_MARKERS_RE.match(paragraph, end)
        if trailing:  # "stability.[1] Traditional": markers after the stop belong to the sentence
            end = trailing.end()
        if end < len(paragraph) and not paragraph[end].isspace():
            continue
        newline = _NEWLINE_NEXT_RE.match(paragraph, end) is not None
        following = _SPACE_RE.match(paragraph, end).end()  # type: ignore[union-attr]  # \s* always matches
        if following == len(paragraph):
            continue
        nxt = paragraph[following:following + 8]
        if not newline:
            if not _STARTER_RE.match(nxt):
                continue
            before = paragraph[max(0, m.start() - _LOOKBACK):m.start()]
            cut = m.start() > _LOOKBACK and not any(c.isspace() for c in before)  # a word longer than the window
            if m.group(0).rstrip("\"'\u201d\u2019)") == "." and not cut and _is_abbreviation(before, nxt):
                continue
        out.append(paragraph[start:end])
        start = end
    out.append(paragraph[start:])
    # A line ending with ":" introduces what follows on the next line: that is a boundary too.
    pieces: list[str] = []
    for chunk in out:
        pieces.extend(re.split(r"(?<=:)[ \t]*\n", chunk))
    return [" ".join(p.split()) for p in pieces if re.search(r"\w", CITATION_GROUP_RE.sub("", p))]


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
    return bool(cells and all(_TABLE_DELIMITER_CELL_RE.match(c) for c in cells))


def _is_heading_like(lines: list[str]) -> bool:
    """A short single line without a full stop or citation ("Related Works", "**Methods**")."""
    return (len(lines) == 1 and len(lines[0].split()) <= 10 and not re.search(r"[.!?:]\W*$", lines[0])
            and not CITATION_GROUP_RE.search(lines[0]))


def _statement_blocks(markdown: str) -> list[tuple[str, bool]]:
    """(text, is_table_row) blocks of a report body: prose blocks are split into sentences, rows are not."""
    lines = (markdown or "").splitlines()
    skip: set[int] = set()
    for a, b in reference_spans(lines):
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
            if re.search(r"\w", CITATION_GROUP_RE.sub("", row)):
                blocks.append((" ".join(row.split()), True))
            continue
        in_table = False
        if len(current) == 1 and _SETEXT_RE.match(line) and not _LIST_ITEM_RE.match(lines[i - 1]):
            current = []  # "Title" underlined with === or ---: a heading
            continue
        if MARKDOWN_HEADING_RE.match(line) or _RULE_RE.match(line) or _TAG_LINE_RE.match(line):
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


def split_report_sentences(markdown: str) -> list[Sentence]:
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
