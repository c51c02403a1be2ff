"""The replay server's Atom writer (replay/atom.py), read back by the `arxiv` client's own parser."""

import xml.etree.ElementTree as ET

import arxiv

from deepscholar.replay.atom import ARXIV_NS, ATOM_NS, OPENSEARCH_NS, error_feed, render_feed

NS = {"atom": ATOM_NS, "arxiv": ARXIV_NS, "opensearch": OPENSEARCH_NS}
SELF_URL = "http://arxiv.org/api/query?search_query=ti:a&start=0&max_results=2"
UPDATED = "2025-06-01T00:00:00Z"

HOSTILE = {
    "id": "2506.01001v2",
    "title": "Bounds for <b> & \"quotes\" in Zoë's Kovačević–Sørensen graphs ∑",
    "summary": "We show x < y & y > z for 100% of ]]> cases; naïve: 日本語.",
    "authors": ["Zoë Müller", "Łukasz Nowak", "O'Brien <admin>"],
    "published": "2025-06-01T00:00:00Z",
    "updated": "2025-06-16T03:00:00Z",
    "comment": "Accepted at ACL 2025 & EMNLP <2025>",
    "journal_ref": "Trans. A&B 1(2):3, 2025",
    "doi": "10.1000/a&b<1>",
    "categories": ["cs.CL", "cs.IR"],
    "primary_category": "cs.CL",
}
PLAIN = {
    "id": "cs/0605001v1", "title": "Old Style", "summary": "Abstract.", "authors": ["A B"],
    "published": "2006-05-01T00:00:00Z", "updated": None, "comment": None, "journal_ref": None, "doi": None,
    "categories": ["cs.IR"], "primary_category": "cs.IR",
}


def _feed(entries=(HOSTILE, PLAIN), total=7, start=2) -> bytes:
    return render_feed(list(entries), total, start, 2, SELF_URL, UPDATED)


def test_arxiv_client_reads_entries_and_paging():
    parsed = arxiv._feed.parse(_feed())
    assert not parsed.malformed
    assert (parsed.header.total_results, parsed.header.start_index, parsed.header.items_per_page) == (7, 2, 2)
    first, second = parsed.results
    assert first.entry_id == "http://arxiv.org/abs/2506.01001v2"
    assert first.get_short_id() == "2506.01001v2"
    assert second.entry_id == "http://arxiv.org/abs/cs/0605001v1"
    assert [a.name for a in first.authors] == HOSTILE["authors"]
    assert first.categories == ["cs.CL", "cs.IR"] and first.primary_category == "cs.CL"
    assert first.published.isoformat() == "2025-06-01T00:00:00+00:00"
    assert first.updated.isoformat() == "2025-06-16T03:00:00+00:00"
    # Without an updated time the entry's updated is its published time (arXiv always sends both).
    assert second.updated == second.published


def test_special_and_non_ascii_text_survives():
    first, _ = arxiv._feed.parse(_feed()).results
    assert first.title == HOSTILE["title"]
    assert first.summary == HOSTILE["summary"]
    assert first.comment == HOSTILE["comment"]
    assert first.journal_ref == HOSTILE["journal_ref"]
    assert first.doi == HOSTILE["doi"]


def test_links():
    first, second = arxiv._feed.parse(_feed()).results
    links = {(link.title, link.rel): (link.href, link.content_type) for link in first.links}
    assert links[(None, "alternate")] == ("http://arxiv.org/abs/2506.01001v2", "text/html")
    assert links[("pdf", "related")] == ("http://arxiv.org/pdf/2506.01001v2", "application/pdf")
    assert links[("doi", "related")] == ("http://dx.doi.org/10.1000/a&b<1>", None)
    assert first.pdf_url == "http://arxiv.org/pdf/2506.01001v2"
    # No DOI: no doi link and no arxiv:doi element.
    assert [link.title for link in second.links] == [None, "pdf"]
    assert second.doi is None and second.comment is None and second.journal_ref is None


def test_namespaces_and_layout():
    body = _feed()
    assert body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n')
    assert body.rstrip().endswith(b"</feed>")  # what sources/arxiv.py checks to refuse a cut-off page
    root = ET.fromstring(body)
    assert root.tag == f"{{{ATOM_NS}}}feed"
    assert root.find("atom:link", NS).attrib == {"href": SELF_URL, "rel": "self", "type": "application/atom+xml"}
    assert root.find("atom:id", NS).text == SELF_URL
    assert root.find("atom:updated", NS).text == UPDATED
    assert root.find("opensearch:totalResults", NS).text == "7"
    entries = root.findall("atom:entry", NS)
    assert len(entries) == 2
    primary = entries[0].find("arxiv:primary_category", NS)
    assert primary.attrib == {"term": "cs.CL", "scheme": ARXIV_NS}
    assert [c.get("term") for c in entries[0].findall("atom:category", NS)] == ["cs.CL", "cs.IR"]
    # The prefixes arXiv uses, declared once on the feed.
    head = body.split(b">", 2)[1]
    assert b'xmlns="http://www.w3.org/2005/Atom"' in head
    assert b'xmlns:arxiv="http://arxiv.org/schemas/atom"' in head
    assert b'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"' in head


def test_empty_page():
    body = render_feed([], 0, 0, 10, SELF_URL, UPDATED)
    parsed = arxiv._feed.parse(body)
    assert not parsed.malformed and parsed.results == [] and parsed.header.total_results == 0
    assert body.rstrip().endswith(b"</feed>")


def test_error_feed():
    body = error_feed("malformed query: missing ')' & more", SELF_URL, UPDATED)
    root = ET.fromstring(body)
    (entry,) = root.findall("atom:entry", NS)
    assert entry.find("atom:id", NS).text == "http://arxiv.org/api/errors#malformed_query_missing_more"
    assert entry.find("atom:title", NS).text == "Error"
    assert entry.find("atom:summary", NS).text == "malformed query: missing ')' & more"
    assert root.find("opensearch:totalResults", NS).text == "1"
    # The client skips the error entry (it has no published time) rather than failing on the feed.
    parsed = arxiv._feed.parse(body)
    assert not parsed.malformed and parsed.results == []
