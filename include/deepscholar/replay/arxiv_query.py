"""arXiv's search_query language, as the replay server understands it.

Design notes: docs/MODULE_NOTES.md, `deepscholar.replay.arxiv_query`.
"""

from __future__ import annotations

import re
from typing import Protocol

from deepscholar.text import normalise_title, strip_arxiv_version

__all__ = ["Query", "QueryError", "Searchable", "matches", "parse_query", "relevance", "required_title_tokens",
           "stem", "text_tokens"]

# A parsed query: ("and"|"or"|"andnot", left, right) or ("term", (field, mode, value)).
Query = tuple


class Searchable(Protocol):
    """What a query is evaluated against: one arXiv entry (one version), pre-tokenised."""

    data: dict  # the entry as the snapshot stores it (categories, comment, journal_ref, ...)
    base_id: str  # the arXiv id without version
    title_tokens: list[str]
    abstract_tokens: list[str]
    author_tokens: list[str]
    submitted: str  # YYYYMMDDHHMM of v1
    updated: str


def stem(token: str) -> str:
    """A crude plural fold standing in for the stemming arXiv's and OpenAlex's search engines do."""
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def text_tokens(text: str) -> list[str]:
    return [stem(t) for t in normalise_title(text).split()]


_QUERY_TOKEN_RE = re.compile(
    r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>ANDNOT|AND|OR)(?=[\s(]|$)'
    r'|(?P<field>[A-Za-z_]+):(?:"(?P<phrase>[^"]*)"|\[(?P<range>[^\]]*)\]|(?P<word>[^\s()"]+))'
    r'|"(?P<bare_phrase>[^"]*)"|(?P<bare>[^\s()"]+))'
)


class QueryError(ValueError):
    """A search_query arXiv would refuse."""


def _lex(query: str) -> list[tuple[str, object]]:
    tokens: list[tuple[str, object]] = []
    pos = 0
    query = query.strip()
    while pos < len(query):
        m = _QUERY_TOKEN_RE.match(query, pos)
        if m is None or m.end() == pos:
            raise QueryError(f"cannot parse query near {query[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("lp"):
            tokens.append(("(", None))
        elif m.group("rp"):
            tokens.append((")", None))
        elif m.group("op"):
            tokens.append(("op", m.group("op")))
        elif m.group("field"):
            field = m.group("field")
            if m.group("range") is not None:
                tokens.append(("term", (field, "range", m.group("range"))))
            elif m.group("phrase") is not None:
                tokens.append(("term", (field, "phrase", m.group("phrase"))))
            else:
                tokens.append(("term", (field, "word", m.group("word"))))
        elif m.group("bare_phrase") is not None:
            tokens.append(("term", ("all", "phrase", m.group("bare_phrase"))))
        elif m.group("bare"):
            tokens.append(("term", ("all", "word", m.group("bare"))))
    return tokens


def _parse(tokens: list[tuple[str, object]]) -> Query:
    """expr := and_expr (OR and_expr)*; and_expr := atom ((AND|ANDNOT)? atom)*; juxtaposition is AND."""
    pos = 0

    def atom():
        nonlocal pos
        if pos >= len(tokens):
            raise QueryError("unexpected end of query")
        kind, value = tokens[pos]
        if kind == "(":
            pos += 1
            node = expr()
            if pos >= len(tokens) or tokens[pos][0] != ")":
                raise QueryError("missing ')'")
            pos += 1
            return node
        if kind == "term":
            pos += 1
            return ("term", value)
        raise QueryError(f"unexpected {kind} {value or ''}")

    def and_expr():
        nonlocal pos
        node = atom()
        while pos < len(tokens):
            kind, value = tokens[pos]
            if kind == "op" and value in ("AND", "ANDNOT"):
                pos += 1
                node = ("and" if value == "AND" else "andnot", node, atom())
            elif kind in ("(", "term"):
                node = ("and", node, atom())
            else:
                break
        return node

    def expr():
        nonlocal pos
        node = and_expr()
        while pos < len(tokens) and tokens[pos] == ("op", "OR"):
            pos += 1
            node = ("or", node, and_expr())
        return node

    tree = expr()
    if pos != len(tokens):
        raise QueryError("trailing tokens in query")
    return tree


def required_title_tokens(node: Query) -> set[str]:
    """Title tokens every match of this query term has (empty: no such constraint)."""
    field, mode, value = node[1]
    if field.lower() != "ti" or mode == "range" or (mode == "word" and value.endswith("*")):
        return set()
    return set(text_tokens(value))


def parse_query(query: str) -> Query:
    """The tree of a search_query; QueryError when it is malformed (arXiv answers those with a 400)."""
    return _parse(_lex(query))


def _contains_phrase(haystack: list[str], needle: list[str]) -> bool:
    if not needle:
        return False
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def _word_match(tokens: list[str], word: str) -> bool:
    if word.endswith("*"):
        prefix = normalise_title(word[:-1])
        return bool(prefix) and any(t.startswith(prefix) for t in tokens)
    wanted = text_tokens(word)
    return _contains_phrase(tokens, wanted) if len(wanted) > 1 else bool(wanted) and wanted[0] in tokens


def _range_match(value: str, spec: str) -> bool:
    parts = re.split(r"\s+TO\s+", spec.strip(), flags=re.IGNORECASE)
    if len(parts) != 2:
        raise QueryError(f"bad date range {spec!r}")
    lo, hi = (p.strip() for p in parts)
    # arXiv accepts YYYYMMDD, YYYYMMDDHHMM and YYYYMMDDHHMMSS; compare at minute granularity.
    lo = (lo + "0000")[:12] if lo != "*" else "000000000000"
    hi = (hi + "2359")[:12] if hi != "*" else "999999999999"
    return lo <= value <= hi


def matches(node: Query, entry: Searchable) -> bool:
    kind = node[0]
    if kind == "and":
        return matches(node[1], entry) and matches(node[2], entry)
    if kind == "andnot":
        return matches(node[1], entry) and not matches(node[2], entry)
    if kind == "or":
        return matches(node[1], entry) or matches(node[2], entry)
    field, mode, value = node[1]
    field_l = field.lower()
    if field_l in ("submitteddate", "lastupdateddate"):
        if mode != "range":
            raise QueryError(f"{field} needs a [A TO B] range")
        return _range_match(entry.submitted if field_l == "submitteddate" else entry.updated, value)
    if field_l == "cat":
        cats = entry.data.get("categories", [])
        if value.endswith("*"):
            return any(c.startswith(value[:-1]) for c in cats)
        return value in cats
    if field_l == "id":
        return strip_arxiv_version(value)[0] == entry.base_id
    tokens = {
        "ti": entry.title_tokens,
        "abs": entry.abstract_tokens,
        "au": entry.author_tokens,
        "co": text_tokens(entry.data.get("comment") or ""),
        "jr": text_tokens(entry.data.get("journal_ref") or ""),
    }.get(field_l)
    if tokens is None:
        if field_l != "all":
            raise QueryError(f"unsupported field {field!r}")
        tokens = entry.title_tokens + entry.abstract_tokens + entry.author_tokens
    if mode == "phrase":
        return _contains_phrase(tokens, text_tokens(value))
    return _word_match(tokens, value)


def relevance(node: Query, entry: Searchable) -> int:
    """Number of text terms the entry matches, title terms double: enough to rank a title search."""
    if node[0] in ("and", "or"):
        return relevance(node[1], entry) + relevance(node[2], entry)
    if node[0] == "andnot":
        return relevance(node[1], entry)
    field, mode, value = node[1]
    if field.lower() not in ("ti", "abs", "all", "au") or mode == "range":
        return 0
    if not matches(node, entry):
        return 0
    return 2 if field.lower() == "ti" else 1
