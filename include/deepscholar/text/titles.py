"""Title normalisation and similarity: the one definition of "the same title" across sources,
reference resolution and the metrics."""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

__all__ = ["normalise_title", "title_similarity"]

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
