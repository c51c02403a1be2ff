"""Decide from an arXiv entry's comment and journal_ref whether a paper was accepted at a venue.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.venues`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_VENUES", "VENUE_ALIASES", "VenueMatch", "detect_venue"]

DEFAULT_VENUES: list[str] = [
    # Machine learning
    "ICML", "NeurIPS", "ICLR", "COLT", "UAI", "AISTATS", "TMLR", "JMLR", "COLM", "CoRL", "MLSys",
    "ACML", "ECML-PKDD", "LoG",
    # AI
    "AAAI", "IJCAI", "ECAI", "AAMAS", "JAIR", "Artificial Intelligence",
    # NLP
    "ACL", "EMNLP", "NAACL", "EACL", "AACL", "COLING", "LREC", "CoNLL", "TACL", "Computational Linguistics",
    "INTERSPEECH", "ICASSP",
    # IR, data mining, web
    "SIGIR", "WWW", "TheWebConf", "WSDM", "CIKM", "RecSys", "KDD", "ICDM", "SDM", "ECIR", "ICTIR",
    "TOIS", "TKDE", "VLDB", "SIGMOD", "ICDE",
    # Vision and graphics
    "CVPR", "ICCV", "ECCV", "WACV", "BMVC", "TPAMI", "IJCV", "SIGGRAPH", "3DV",
    # Robotics
    "ICRA", "IROS", "RSS", "IEEE RA-L",
    # Security, systems, HCI
    "USENIX Security", "CCS", "IEEE S&P", "NDSS", "OSDI", "SOSP", "NSDI", "EuroSys", "CHI", "UIST",
    # Journals
    "Nature", "Science", "Nature Machine Intelligence", "Nature Communications", "PNAS",
    "IEEE TNNLS", "Machine Learning", "Neural Computation", "Transactions on Machine Learning Research",
]

# Other ways authors write a venue. Keys are entries of DEFAULT_VENUES; a custom venue list
# picks its aliases up by name, so configuring ["NeurIPS"] still matches "NIPS 2017".
VENUE_ALIASES: dict[str, list[str]] = {
    "NeurIPS": ["NIPS", "Neural Information Processing Systems"],
    "ICML": ["International Conference on Machine Learning"],
    "ICLR": ["International Conference on Learning Representations"],
    "ACL": ["Association for Computational Linguistics"],
    "EMNLP": ["Empirical Methods in Natural Language Processing"],
    "NAACL": ["NAACL-HLT", "North American Chapter of the Association for Computational Linguistics"],
    "EACL": ["European Chapter of the Association for Computational Linguistics"],
    "AACL": ["AACL-IJCNLP"],
    "TACL": ["Transactions of the Association for Computational Linguistics"],
    "COLM": ["Conference on Language Modeling"],
    "CVPR": ["Computer Vision and Pattern Recognition"],
    "ICCV": ["International Conference on Computer Vision"],
    "ECCV": ["European Conference on Computer Vision"],
    "KDD": ["SIGKDD", "Knowledge Discovery and Data Mining"],
    "WWW": ["The Web Conference", "Web Conference", "World Wide Web Conference"],
    "TheWebConf": ["The Web Conference"],
    "WSDM": ["Web Search and Data Mining"],
    "CIKM": ["Information and Knowledge Management"],
    "RecSys": ["Recommender Systems"],
    "SIGIR": ["Research and Development in Information Retrieval"],
    "TMLR": ["Transactions on Machine Learning Research"],
    "JMLR": ["Journal of Machine Learning Research"],
    "UAI": ["Uncertainty in Artificial Intelligence"],
    "AISTATS": ["Artificial Intelligence and Statistics"],
    "CoRL": ["Conference on Robot Learning"],
    "ICRA": ["International Conference on Robotics and Automation"],
    "IROS": ["Intelligent Robots and Systems"],
    "IJCAI": ["International Joint Conference on Artificial Intelligence"],
    "AAAI": ["AAAI Conference on Artificial Intelligence"],
    "TPAMI": ["PAMI", "Pattern Analysis and Machine Intelligence"],
    "IEEE RA-L": ["RA-L", "RAL", "Robotics and Automation Letters"],
    "IEEE S&P": ["S&P", "IEEE Symposium on Security and Privacy"],
    "PNAS": ["Proceedings of the National Academy of Sciences"],
    "LoG": ["Learning on Graphs"],
}

# Journal names that are ordinary words: matched only when capitalised and not part of a longer
# name ("Data Science", "Computer Science").
_WORD_VENUES = {"Nature", "Science", "Machine Learning", "Artificial Intelligence", "Computational Linguistics",
                "Neural Computation", "RSS"}

FieldName = Literal["comment", "journal_ref"]


@dataclass(frozen=True)
class VenueMatch:
    venue: str
    phrase: str
    field: FieldName


_YEAR = r"(?:[\s\-]*(?:'|’)?\s*(?:19|20)\d{2}|\s*(?:'|’|-)\s*\d{2})(?!\d)"

_POSITIVE_TRIGGERS = [
    r"\baccepted\s+as\s+(?:an?\s+)?(?:[\w-]+\s+){0,4}?(?:paper|oral|poster|spotlight|talk|presentation)"
    r"\s+(?:at|to|by|in|for)\b",
    r"\b(?:accepted|acceptance)\s+(?:at|to|by|in|for)\b",
    r"\bto\s+appear\s+(?:in|at)\b",
    r"\bappear(?:s|ed)?\s+in\b",
    r"\bpublished\s+(?:in|at|as|by)\b",
    r"\bpresented\s+at\b",
    r"\bcamera[\s-]*ready\b",
    r"\bin\s+proceedings\s+of\b",
]
_POSITIVE_RE = re.compile("|".join(f"(?:{p})" for p in _POSITIVE_TRIGGERS), re.IGNORECASE)

_NEGATIVE_RE = re.compile(
    r"\b(?:under\s+review|in\s+review|under\s+submission|in\s+submission|submitted\s+(?:to|for|at)"
    r"|submission\s+to|under\s+consideration|preprint|work[\s-]+in[\s-]+progress|not\s+(?:yet\s+)?accepted"
    r"|rejected|withdrawn)\b",
    re.IGNORECASE,
)
# A status marker right after "VENUE YEAR" reads as acceptance even without a verb.
_STATUS_AFTER_RE = re.compile(
    r"^\s*[\(\[,:\-]?\s*(?:oral|poster|spotlight|highlight|main(?:\s+conference|\s+track)?|findings"
    r"|accepted|camera[\s-]*ready)\b\s*[\)\]]?",
    re.IGNORECASE,
)
_WORKSHOP_RE = re.compile(r"\bworkshops?\b|\bW\d?\s*@|@\s*\w+\s*(?:19|20)\d{2}\b", re.IGNORECASE)
# Clauses end at ';', '|', a newline, or a full stop followed by a new sentence.
_CLAUSE_SPLIT_RE = re.compile(r"[;|\n]+|\.\s+(?=[A-Z(])")


@dataclass(frozen=True)
class _Hit:
    start: int
    end: int
    venue: str
    acronym: bool


def _venue_pattern(name: str) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(part) for part in name.split())
    # Not inside a word, a URL or an e-mail ("www.x.org", "acl@x"); "ICML-25" still matches.
    pattern = rf"(?<![\w./@&-]){body}(?![\w&]|[./@]\w|-[A-Za-z])"
    flags = 0 if name in _WORD_VENUES else re.IGNORECASE
    return re.compile(pattern, flags)


_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}


def _cached_pattern(name: str) -> re.Pattern[str]:
    pat = _PATTERN_CACHE.get(name)
    if pat is None:
        pat = _PATTERN_CACHE[name] = _venue_pattern(name)
    return pat


def _is_acronym(name: str) -> bool:
    return not any(ch.isspace() for ch in name)


def _find_venues(text: str, venues: list[str]) -> list[_Hit]:
    hits: list[_Hit] = []
    for venue in venues:
        for alias in [venue, *VENUE_ALIASES.get(venue, [])]:
            for m in _cached_pattern(alias).finditer(text):
                if alias in _WORD_VENUES and _preceded_by_name_word(text, m.start()):
                    continue
                hits.append(_Hit(m.start(), m.end(), venue, _is_acronym(alias)))
    # A name inside a longer one is the longer one ("Nature Machine Intelligence", NAACL's full
    # name containing ACL's).
    hits = [h for h in hits if not any(
        o.start <= h.start and h.end <= o.end and (o.end - o.start) > (h.end - h.start) for o in hits)]
    # Acronyms name the venue most precisely: "Findings of the Association for Computational
    # Linguistics: EMNLP 2025" is EMNLP.
    hits.sort(key=lambda h: (not h.acronym, h.start))
    return hits


def _preceded_by_name_word(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    m = re.search(r"([A-Za-z]+)$", before)
    if m is None:
        return False
    word = m.group(1)
    return word[0].isupper() or word.lower() in {"of", "on", "for", "and"}


def _with_year(text: str, end: int) -> int:
    m = re.match(_YEAR, text[end:])
    return end + m.end() if m else end


def _close_paren(text: str, start: int, end: int) -> int:
    """Extend a phrase over a ')' that closes a '(' inside it: "Transactions ... (TMLR)"."""
    if text[start:end].count("(") > text[start:end].count(")") and text[end:end + 1] == ")":
        return end + 1
    return end


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT_RE.split(text) if c and c.strip()]


def _explicit_acceptance(clause: str, venues: list[str], accept_workshops: bool) -> VenueMatch | None:
    for trig in _POSITIVE_RE.finditer(clause):
        tail = clause[trig.end():]
        hits = _find_venues(tail, venues)
        if not hits:
            continue
        if not accept_workshops and _WORKSHOP_RE.search(tail):
            return None
        hit = hits[0]
        end = _close_paren(clause, trig.start(), trig.end() + _with_year(tail, hit.end))
        phrase = clause[trig.start(): end].strip()
        return VenueMatch(venue=hit.venue, phrase=phrase, field="comment")
    return None


def _bare_mention(clause: str, venues: list[str], accept_workshops: bool) -> tuple[VenueMatch | None, bool]:
    """Return a "VENUE YEAR" mention and whether it carries a status marker (oral, findings...)."""
    for hit in _find_venues(clause, venues):
        end = _with_year(clause, hit.end)
        has_year = end > hit.end
        status = _STATUS_AFTER_RE.match(clause[end:])
        if not has_year and status is None and not _FINDINGS_BEFORE_RE.search(clause[: hit.start]):
            continue
        if not accept_workshops and _WORKSHOP_RE.search(clause):
            return None, False
        phrase_end = end + status.end() if status else end
        phrase_start = hit.start
        fb = _FINDINGS_BEFORE_RE.search(clause[: hit.start])
        if fb:
            phrase_start = fb.start()
        phrase = clause[phrase_start:phrase_end].strip(" ([,:-")
        marked = status is not None or fb is not None
        return VenueMatch(venue=hit.venue, phrase=phrase, field="comment"), marked
    return None, False


_FINDINGS_BEFORE_RE = re.compile(r"\bfindings\s+of(?:\s+the)?\s*$", re.IGNORECASE)


def _journal_ref_match(journal_ref: str, venues: list[str], accept_workshops: bool) -> VenueMatch | None:
    ref = " ".join(journal_ref.split())
    if not ref or _NEGATIVE_RE.search(ref):
        return None
    if not accept_workshops and _WORKSHOP_RE.search(ref):
        return None
    hits = _find_venues(ref, venues)
    if hits:
        return VenueMatch(venue=hits[0].venue, phrase=ref, field="journal_ref")
    # arXiv only shows a journal_ref once the paper is out, so any reference counts; the venue
    # is its leading name ("Phys. Rev. D 105, 1 (2022)" -> "Phys. Rev. D").
    name = re.split(r",|\(|\s\d", ref, maxsplit=1)[0].strip() or ref
    return VenueMatch(venue=name, phrase=ref, field="journal_ref")


def detect_venue(
    comment: str | None,
    journal_ref: str | None,
    venues: list[str] | None = None,
    *,
    accept_workshops: bool = False,
) -> VenueMatch | None:
    """Where the paper was accepted or published, or None when nothing says it passed review."""
    venue_list = list(DEFAULT_VENUES if venues is None else venues)
    comment = comment or ""
    clauses = _clauses(comment)

    for clause in clauses:
        found = _explicit_acceptance(clause, venue_list, accept_workshops)
        if found is not None:
            return found

    if journal_ref and journal_ref.strip():
        found = _journal_ref_match(journal_ref, venue_list, accept_workshops)
        if found is not None:
            return found

    negative = _NEGATIVE_RE.search(comment) is not None
    for clause in clauses:
        found, marked = _bare_mention(clause, venue_list, accept_workshops)
        if found is None:
            continue
        # "NeurIPS 2025 (spotlight)" is a claim of acceptance; a plain "NeurIPS 2025" beside
        # "under review" most likely names the submission target.
        if marked and not _NEGATIVE_RE.search(clause):
            return found
        if not negative:
            return found
    return None
