"""The replay server's arXiv query language (replay/arxiv_query.py) and its id_list handling."""

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from werkzeug.test import Client

from deepscholar.replay.arxiv_query import (
    QueryError,
    matches,
    parse_query,
    relevance,
    required_title_tokens,
    text_tokens,
)
from deepscholar.replay.server import ReplayApp, Snapshot


def term(field_: str, mode: str, value: str) -> tuple:
    return ("term", (field_, mode, value))


@dataclass
class FakeEntry:
    title: str = ""
    abstract: str = ""
    authors: list[str] = field(default_factory=list)
    base_id: str = "2506.01001"
    submitted: str = "202506011200"
    updated: str = "202506011200"
    data: dict = field(default_factory=dict)

    @property
    def title_tokens(self) -> list[str]:
        return text_tokens(self.title)

    @property
    def abstract_tokens(self) -> list[str]:
        return text_tokens(self.abstract)

    @property
    def author_tokens(self) -> list[str]:
        return text_tokens(" ".join(self.authors))


# --- parsing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query, tree", [
    ("ti:graph", term("ti", "word", "graph")),
    ("abs:retrieval", term("abs", "word", "retrieval")),
    ("au:Zhang", term("au", "word", "Zhang")),
    ("cat:cs.CL", term("cat", "word", "cs.CL")),
    ("id:2506.01001v2", term("id", "word", "2506.01001v2")),
    ("co:accepted", term("co", "word", "accepted")),
    ("jr:Transactions", term("jr", "word", "Transactions")),
    ("all:nets", term("all", "word", "nets")),
    ("ti:retriev*", term("ti", "word", "retriev*")),
    ("submittedDate:[202506010000 TO 202506302359]", term("submittedDate", "range", "202506010000 TO 202506302359")),
    ('ti:"graph neural networks"', term("ti", "phrase", "graph neural networks")),
    ('"bare phrase"', term("all", "phrase", "bare phrase")),
    ("word", term("all", "word", "word")),
])
def test_field_prefixes_and_terms(query, tree):
    assert parse_query(query) == tree


def test_boolean_operators_and_precedence():
    a, b, c = term("ti", "word", "a"), term("ti", "word", "b"), term("ti", "word", "c")
    assert parse_query("ti:a AND ti:b") == ("and", a, b)
    assert parse_query("ti:a OR ti:b") == ("or", a, b)
    assert parse_query("ti:a ANDNOT ti:b") == ("andnot", a, b)
    # AND (and ANDNOT) bind tighter than OR; operators of one level associate to the left.
    assert parse_query("ti:a OR ti:b AND ti:c") == ("or", a, ("and", b, c))
    assert parse_query("ti:a AND ti:b OR ti:c") == ("or", ("and", a, b), c)
    assert parse_query("ti:a ANDNOT ti:b ANDNOT ti:c") == ("andnot", ("andnot", a, b), c)
    # Juxtaposition is AND.
    assert parse_query("ti:a ti:b") == ("and", a, b)


def test_parentheses_group():
    a, b, c = term("cat", "word", "cs.CL"), term("cat", "word", "cs.IR"), term("ti", "word", "graph")
    assert parse_query("(cat:cs.CL OR cat:cs.IR) AND ti:graph") == ("and", ("or", a, b), c)
    assert parse_query("ti:graph ANDNOT (cat:cs.CL OR cat:cs.IR)") == ("andnot", c, ("or", a, b))
    assert parse_query("((ti:graph))") == c


def test_operator_words_inside_terms_are_not_operators():
    assert parse_query("ti:ORACLE") == term("ti", "word", "ORACLE")
    assert parse_query('ti:"this AND that"') == term("ti", "phrase", "this AND that")


@pytest.mark.parametrize("query", ["ti:(", "(ti:a", "ti:a)", "AND ti:a", "ti:a OR", "ti:a AND AND ti:b", ")"])
def test_malformed_queries_raise(query):
    with pytest.raises(QueryError):
        parse_query(query)


def test_required_title_tokens():
    assert required_title_tokens(parse_query('ti:"Graph Networks"')) == {"graph", "network"}
    assert required_title_tokens(parse_query("ti:graph*")) == set()
    assert required_title_tokens(parse_query("abs:graph")) == set()


# --- evaluation -------------------------------------------------------------------------------------------


ENTRY = FakeEntry(
    title="Graph Neural Networks for Retrieval",
    abstract="We study message passing on citation graphs.",
    authors=["Zoë Müller", "Bo Zhang"],
    submitted="202506011200",
    updated="202506201200",
    data={"categories": ["cs.LG", "stat.ML"], "comment": "Accepted at ICML 2025", "journal_ref": None},
)


@pytest.mark.parametrize("query, expected", [
    ("ti:graph", True),
    ("ti:network", True),  # plural folded on both sides
    ("ti:message", False),
    ("abs:message", True),
    ("au:zhang", True),
    ("au:Muller", True),  # accents folded
    ('ti:"neural networks"', True),
    ('ti:"networks neural"', False),  # a phrase keeps its word order
    ("ti:retriev*", True),
    ("cat:cs.LG", True),
    ("cat:cs.CL", False),
    ("cat:stat.*", True),
    ("id:2506.01001v3", True),  # any version names the paper
    ("id:2506.01002", False),
    ("co:ICML", True),
    ("jr:ICML", False),
    ("all:passing", True),
    ("submittedDate:[20250601 TO 20250601]", True),
    ("submittedDate:[202506011201 TO *]", False),
    ("lastUpdatedDate:[202506200000 TO 202506202359]", True),
    ("ti:graph AND cat:cs.CL", False),
    ("ti:graph OR cat:cs.CL", True),
    ("ti:graph ANDNOT cat:cs.CL", True),
    ("ti:graph ANDNOT cat:cs.LG", False),
    ("(cat:cs.CL OR cat:stat.ML) AND abs:citation", True),
])
def test_matches(query, expected):
    assert matches(parse_query(query), ENTRY) is expected


@pytest.mark.parametrize("query", ["foo:bar", "submittedDate:2025", "submittedDate:[2025]"])
def test_unsupported_terms_raise_on_evaluation(query):
    with pytest.raises(QueryError):
        matches(parse_query(query), ENTRY)


def test_relevance_weighs_title_terms_double():
    assert relevance(parse_query("ti:graph"), ENTRY) == 2
    assert relevance(parse_query("abs:graph"), ENTRY) == 1
    assert relevance(parse_query("ti:graph AND abs:message AND cat:cs.LG"), ENTRY) == 3
    assert relevance(parse_query("ti:graph ANDNOT abs:message"), ENTRY) == 2
    assert relevance(parse_query("ti:absent"), ENTRY) == 0


# --- id_list (the server looks ids up itself) ---------------------------------------------------------------


def _entry(arxiv_id: str, title: str, published: str) -> dict:
    return {"id": arxiv_id, "title": title, "summary": f"{title}.", "authors": ["A B"], "published": published,
            "updated": published, "comment": None, "journal_ref": None, "doi": None,
            "categories": ["cs.CL"], "primary_category": "cs.CL"}


@pytest.fixture
def client(tmp_path: Path) -> Client:
    rows = [_entry("2506.01001v1", "First Paper", "2025-06-01T00:00:00Z"),
            _entry("2506.01001v2", "First Paper Revised", "2025-06-01T00:00:00Z"),
            _entry("2506.01002v1", "Second Paper", "2025-06-02T00:00:00Z"),
            _entry("cs/0605001v1", "Old Style Paper", "2006-05-01T00:00:00Z")]
    (tmp_path / "arxiv").mkdir()
    (tmp_path / "arxiv" / "entries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "manifest.json").write_text(json.dumps({"month": "2025-06"}))
    return Client(ReplayApp(Snapshot(tmp_path)))


def _ids(client: Client, **params) -> tuple[int, list[str]]:
    import arxiv

    response = client.get("/api/query", query_string=params)
    feed = arxiv._feed.parse(response.get_data())
    return response.status_code, [r.entry_id.removeprefix("http://arxiv.org/abs/") for r in feed.results]


def test_id_list_keeps_order_and_resolves_versions(client):
    status, ids = _ids(client, id_list="2506.01002,2506.01001v1,cs/0605001")
    assert status == 200 and ids == ["2506.01002v1", "2506.01001v1", "cs/0605001v1"]
    # Without a version: the latest one.
    assert _ids(client, id_list="2506.01001") == (200, ["2506.01001v2"])
    # Unknown ids are left out; duplicates answered once.
    assert _ids(client, id_list="2506.09999,2506.01002,2506.01002") == (200, ["2506.01002v1"])


def test_id_list_with_query_filters(client):
    assert _ids(client, id_list="2506.01001,2506.01002", search_query="ti:second") == (200, ["2506.01002v1"])


def test_id_list_bad_format_is_a_400(client):
    assert _ids(client, id_list="not-an-id")[0] == 400
