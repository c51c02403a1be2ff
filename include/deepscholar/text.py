"""Small text helpers shared by sources, extraction and reference resolution."""

from __future__ import annotations

import re
import unicodedata
from datetime import date
from difflib import SequenceMatcher

__all__ = [
    "ARXIV_NEW_ID_RE",
    "ARXIV_OLD_ID_RE",
    "normalise_title",
    "title_similarity",
    "strip_arxiv_version",
    "arxiv_id_lower_bound_date",
]

# New-style ids (April 2007 on): YYMM.NNNN (until 2014) or YYMM.NNNNN, optional vN.
ARXIV_NEW_ID_RE = re.compile(r"(?P<id>\d{2}(?:0[1-9]|1[0-2])\.\d{4,5})(?:v(?P<version>\d+))?")
# Old-style ids: archive[.SUBJ]/YYMMNNN, e.g. cs/0601001v2, math.GT/0309136.
ARXIV_OLD_ID_RE = re.compile(
    r"(?P<id>[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{2}(?:0[1-9]|1[0-2])\d{3})(?:v(?P<version>\d+))?"
)

# LaTeX accent commands (\'e, \"{o}, \c{c}) — the accent is dropped, the letter kept, because
# titles from .bib files and from APIs must compare equal.
_LATEX_SYMBOL_ACCENT_RE = re.compile(r"\\[`'^\"~=.]\s*\{?\s*([A-Za-z])\s*\}?")
# Letter accents (\v{s}, \c c) need a brace or a space, or \textbf would read as \t + "extbf".
_LATEX_LETTER_ACCENT_RE = re.compile(r"\\[uvHtcdbk](?:\s*\{\s*([A-Za-z])\s*\}|\s+([A-Za-z])(?![A-Za-z]))")
_LATEX_CMD_RE = re.compile(r"\\[A-Za-z]+\*?")
_LATEX_LIGATURES = {
    r"\ss": "ss", r"\o": "o", r"\O": "o", r"\ae": "ae", r"\AE": "ae", r"\oe": "oe",
    r"\OE": "oe", r"\aa": "a", r"\AA": "a", r"\l": "l", r"\L": "l", r"\i": "i",
}
_NON_WORD_RE = re.compile(r"[^\w\s]|_")
_SPACE_RE = re.compile(r"\s+")


def normalise_title(s: str | None) -> str:
    """Reduce a title to a comparable key: case, accents, LaTeX markup and punctuation removed."""
    if not s:
        return ""
    text = _LATEX_SYMBOL_ACCENT_RE.sub(r"\1", s)
    text = _LATEX_LETTER_ACCENT_RE.sub(lambda m: m.group(1) or m.group(2), text)
    for cmd, repl in _LATEX_LIGATURES.items():
        text = re.sub(re.escape(cmd) + r"(?![A-Za-z])", repl, text)
    # \emph{X}, \textbf{X}: keep X, drop the command name.
    text = _LATEX_CMD_RE.sub(" ", text)
    # Braces group or protect case ({BERT}); dropping them must not split a word (caf{e}).
    text = text.replace("{", "").replace("}", "").replace("~", " ")
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.casefold()
    text = _NON_WORD_RE.sub(" ", text)
    return _SPACE_RE.sub(" ", text).strip()


def title_similarity(a: str | None, b: str | None) -> float:
    """Similarity of two titles in [0, 1]; stdlib SequenceMatcher keeps the dependency list short."""
    na, nb = normalise_title(a), normalise_title(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    return SequenceMatcher(None, na, nb, autojunk=False).ratio()


def strip_arxiv_version(arxiv_id: str) -> tuple[str, int | None]:
    """Split '2506.02838v1' into ('2506.02838', 1); papers are keyed without the version."""
    text = arxiv_id.strip()
    for prefix in ("arXiv:", "arxiv:", "ARXIV:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    m = ARXIV_NEW_ID_RE.fullmatch(text) or ARXIV_OLD_ID_RE.fullmatch(text)
    if m is None:
        # Unknown shape: still peel a trailing vN so callers get a stable key.
        m2 = re.fullmatch(r"(.+?)v(\d+)", text)
        if m2:
            return m2.group(1), int(m2.group(2))
        return text, None
    version = m.group("version")
    return m.group("id"), int(version) if version else None


def arxiv_id_lower_bound_date(arxiv_id: str) -> date | None:
    """First day of the month a new-style id was assigned: a paper cannot predate it."""
    base, _ = strip_arxiv_version(arxiv_id)
    m = ARXIV_NEW_ID_RE.fullmatch(base)
    if m is None:
        return None
    yy, mm = int(base[:2]), int(base[2:4])
    return date(2000 + yy, mm, 1)
