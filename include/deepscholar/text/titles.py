"""Title normalisation, similarity and the one rule for "the same title": the one definition across
sources, reference resolution and the metrics.

Design notes: docs/MODULE_NOTES.md, `deepscholar.text.titles`.
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

__all__ = ["MIN_PART_WORDS", "normalise_title", "same_title", "title_forms", "title_similarity"]

# A part of a title (before or after its colon, or before a "...") names the paper only when it says enough:
# "A Survey" or "BERT" alone name many works. The labelled pairs of docs/METRICS.md have no pair this floor
# decides either way; it is the cautious side of a choice they cannot make.
MIN_PART_WORDS = 4

# LaTeX accent commands and the combining mark each writes: the letter keeps its accent until the key
# drops every accent at once, so a LaTeX accent and a Unicode one give the same key.
_COMBINING = {"`": "\u0300", "'": "\u0301", "^": "\u0302", "~": "\u0303", "=": "\u0304", "u": "\u0306",
              ".": "\u0307", '"': "\u0308", "r": "\u030a", "H": "\u030b", "v": "\u030c", "d": "\u0323",
              "c": "\u0327", "k": "\u0328", "b": "\u0331", "t": "\u0361"}
# LaTeX's letter commands, as the letters they write.
_LATEX_LETTERS = {"ss": "ß", "o": "ø", "O": "Ø", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "aa": "å",
                  "AA": "Å", "l": "ł", "L": "Ł", "i": "ı", "j": "ȷ"}
# Letters Unicode does not decompose into a base letter and a mark, folded by hand (after case folding).
_UNDECOMPOSED = str.maketrans({"ø": "o", "ł": "l", "ı": "i", "ȷ": "j", "đ": "d", "ð": "d", "þ": "th",
                               "æ": "ae", "œ": "oe", "ħ": "h", "ŧ": "t"})
# A control word swallows the spaces after it (`S\o ren` is "Søren"), and `{}` ends it as well.
_LATEX_LETTER_RE = re.compile(r"\\(" + "|".join(sorted(_LATEX_LETTERS, key=len, reverse=True)) +
                              r")(?![A-Za-z])(?:\s*\{\s*\}|\s*)")
_LETTER = r"[^\W\d_]"
# A symbol accent takes the next letter, braced or not (\'e, \' e, \'{e}); a letter accent needs a brace or
# a space (\c{c}, \c c), or \textbf would read as \t + "extbf". LaTeX's argument is one letter: `\c cais`
# is "çais".
_LATEX_ACCENT_RE = re.compile(
    r"\\(?:([`'^\"~=.])\s*(?:\{\s*(" + _LETTER + r")\s*\}|(" + _LETTER + r"))"
    r"|([uvHtcdbkr])(?:\s*\{\s*(" + _LETTER + r")\s*\}|\s+(" + _LETTER + r")))")
_LATEX_CMD_RE = re.compile(r"\\[A-Za-z]+\*?")
_NON_WORD_RE = re.compile(r"[^\w\s]|_")
_SPACE_RE = re.compile(r"\s+")

# What a web page or a search engine adds to a paper's title: a leading `[PDF]`, `(PDF)` or `[HTML]`, an
# arXiv abstract page's `[2411.19581]`, and a trailing ` - arXiv` or ` | OpenReview` naming the site.
_WEB_PREFIX_RE = re.compile(r"^\s*(?:[\[(](?:pdf|html|citation|book)[\])]|\[\d{4}\.\d{4,5}(?:v\d+)?\])\s*",
                            re.IGNORECASE)
_SITES = ("arxiv", "arxiv.org", "openreview", "openreview.net", "acl anthology", "aclanthology", "isca archive",
          "researchgate", "semantic scholar", "google scholar", "sciencedirect", "springerlink", "ieee xplore",
          "acm digital library", "dblp", "pubmed", "papers with code", "hugging face", "cvf open access")
_WEB_SUFFIX_RE = re.compile(r"\s+[-|–—]\s+(?:" + "|".join(re.escape(s) for s in _SITES) + r")\s*$", re.IGNORECASE)
_CUT_RE = re.compile(r"\s*(?:\.{2,}|…)\s*$")


def _accented(m: re.Match) -> str:
    accent = m.group(1) or m.group(4)
    letter = next(g for g in (m.group(2), m.group(3), m.group(5), m.group(6)) if g)
    return unicodedata.normalize("NFC", letter + _COMBINING[accent])


def normalise_title(s: str | None) -> str:
    """Reduce a title to a comparable key: case, accents, LaTeX markup and punctuation removed."""
    if not s:
        return ""
    text = _LATEX_LETTER_RE.sub(lambda m: _LATEX_LETTERS[m.group(1)], s)
    text = _LATEX_ACCENT_RE.sub(_accented, text)
    # \emph{X}, \textbf{X}: keep X, drop the command name.
    text = _LATEX_CMD_RE.sub(" ", text)
    # Braces group or protect case ({BERT}); dropping them must not split a word (caf{e}).
    text = text.replace("{", "").replace("}", "").replace("~", " ")
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.casefold().translate(_UNDECOMPOSED)
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


def title_forms(title: str | None) -> tuple[tuple[str, bool], ...]:
    """The forms one written title can be matched by: (key, cut) for the whole title and, when it has a
    colon, for the parts before and after it; `cut` says the form may be the start of a longer title (the
    title ended in "..."). The web page's additions are removed first; the whole title's key comes first."""
    text = _WEB_SUFFIX_RE.sub("", _WEB_PREFIX_RE.sub("", title or ""))
    cut = bool(_CUT_RE.search(text))
    text = _CUT_RE.sub("", text)
    forms = [(normalise_title(text), cut)]
    if ":" in text:
        main, sub = text.split(":", 1)
        forms += [(normalise_title(main), False), (normalise_title(sub), cut)]
    return tuple(dict.fromkeys(f for f in forms if f[0]))


def _words(key: str) -> int:
    return len(key.split())


def _one_names_the_other(short: tuple[str, bool], long: tuple[str, bool], whole: bool, floor: int) -> bool:
    """`short` names the paper `long` names: the same words (spaces aside), or, for a part or a cut title of
    at least `floor` words, the start of `long`'s words."""
    (a, cut), (b, _) = short, long
    if a.replace(" ", "") == b.replace(" ", ""):
        return whole or _words(a) >= floor
    return cut and _words(a) >= floor and (b + " ").startswith(a + " ")


def same_title(a: str | None, b: str | None, *, min_part_words: int = MIN_PART_WORDS) -> bool:
    """Do two written titles name one paper (module docstring)? Symmetric. `min_part_words`: the floor for
    a part of a title (evaluation/title_evidence.py measures another beside it)."""
    forms_a, forms_b = title_forms(a), title_forms(b)
    if not forms_a or not forms_b:
        return False
    for i, fa in enumerate(forms_a):
        for j, fb in enumerate(forms_b):
            if i and j:
                continue  # two parts: "GANs: A Survey of ..." and "Transformers: A Survey of ..." are two papers
            whole = not (i or j)  # the whole titles: equal words need no floor
            if (_one_names_the_other(fa, fb, whole, min_part_words)
                    or _one_names_the_other(fb, fa, whole, min_part_words)):
                return True
    return False
