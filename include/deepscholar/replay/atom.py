"""The Atom feeds the arXiv API answers with, written with ElementTree.

A feed is Atom 1.0 with arXiv's extension elements (arxiv:comment, arxiv:journal_ref, arxiv:doi,
arxiv:primary_category) and the OpenSearch paging elements (opensearch:totalResults, startIndex,
itemsPerPage), laid out as the real API lays them out, so the `arxiv` client parses it as it parses
arXiv's own answers. Text and attributes are escaped by the serializer; the output is UTF-8.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

__all__ = ["ARXIV_NS", "ATOM_NS", "OPENSEARCH_NS", "error_feed", "render_entry", "render_feed"]

ATOM_NS = "http://www.w3.org/2005/Atom"
ARXIV_NS = "http://arxiv.org/schemas/atom"
OPENSEARCH_NS = "http://a9.com/-/spec/opensearch/1.1/"

# The prefixes arXiv uses, Atom as the default namespace. ElementTree keeps prefixes in a process-wide map
# (tostring's default_namespace= would keep it local, but it refuses the unqualified attribute names Atom
# uses), so other ElementTree output naming these URIs gets the same prefixes instead of ns0, ns1.
ET.register_namespace("", ATOM_NS)
ET.register_namespace("arxiv", ARXIV_NS)
ET.register_namespace("opensearch", OPENSEARCH_NS)

_XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'


def _atom(tag: str) -> str:
    return f"{{{ATOM_NS}}}{tag}"


def _arxiv(tag: str) -> str:
    return f"{{{ARXIV_NS}}}{tag}"


def _text_child(parent: ET.Element, tag: str, text: str | None) -> None:
    """A child element holding text; none at all for a missing or empty value (as arXiv omits them)."""
    if text:
        ET.SubElement(parent, tag).text = text


def render_entry(data: dict) -> ET.Element:
    """One <entry> for a stored arXiv entry (one version)."""
    vid = data["id"]
    abs_url = f"http://arxiv.org/abs/{vid}"
    entry = ET.Element(_atom("entry"))
    _text_child(entry, _atom("id"), abs_url)
    _text_child(entry, _atom("updated"), data.get("updated") or data["published"])
    _text_child(entry, _atom("published"), data["published"])
    _text_child(entry, _atom("title"), data.get("title", ""))
    _text_child(entry, _atom("summary"), data.get("summary", ""))
    for name in data.get("authors", []):
        author = ET.SubElement(entry, _atom("author"))
        ET.SubElement(author, _atom("name")).text = name
    if data.get("doi"):
        _text_child(entry, _arxiv("doi"), data["doi"])
        ET.SubElement(entry, _atom("link"), {"title": "doi", "href": "http://dx.doi.org/" + data["doi"],
                                             "rel": "related"})
    _text_child(entry, _arxiv("comment"), data.get("comment"))
    _text_child(entry, _arxiv("journal_ref"), data.get("journal_ref"))
    ET.SubElement(entry, _atom("link"), {"href": abs_url, "rel": "alternate", "type": "text/html"})
    ET.SubElement(entry, _atom("link"), {"title": "pdf", "href": "http://arxiv.org/pdf/" + vid, "rel": "related",
                                         "type": "application/pdf"})
    primary = data.get("primary_category") or (data.get("categories") or [""])[0]
    ET.SubElement(entry, _arxiv("primary_category"), {"term": primary, "scheme": ARXIV_NS})
    for cat in data.get("categories", []):
        ET.SubElement(entry, _atom("category"), {"term": cat, "scheme": ARXIV_NS})
    return entry


def _feed(total: int, start: int, per_page: int, self_url: str, updated: str) -> ET.Element:
    """The feed element with its header: self link, title, id, updated time and OpenSearch paging."""
    feed = ET.Element(_atom("feed"))
    ET.SubElement(feed, _atom("link"), {"href": self_url, "rel": "self", "type": "application/atom+xml"})
    ET.SubElement(feed, _atom("title"), {"type": "html"}).text = "ArXiv Query: " + self_url
    ET.SubElement(feed, _atom("id")).text = self_url
    ET.SubElement(feed, _atom("updated")).text = updated
    for tag, value in (("totalResults", total), ("startIndex", start), ("itemsPerPage", per_page)):
        ET.SubElement(feed, f"{{{OPENSEARCH_NS}}}{tag}").text = str(value)
    return feed


def _serialize(feed: ET.Element) -> bytes:
    ET.indent(feed, space="  ")
    return (_XML_DECLARATION + ET.tostring(feed, encoding="unicode") + "\n").encode("utf-8")


def render_feed(entries: list[dict], total: int, start: int, per_page: int, self_url: str,
                updated: str) -> bytes:
    """A page of search results: `entries` are the stored entries on it, `total` all that matched."""
    feed = _feed(total, start, per_page, self_url, updated)
    feed.extend(render_entry(e) for e in entries)
    return _serialize(feed)


def error_feed(message: str, self_url: str, updated: str) -> bytes:
    """arXiv's answer to a bad request: a feed whose one entry (id .../api/errors#...) says what is wrong."""
    feed = _feed(1, 0, 1, self_url, updated)
    entry = ET.SubElement(feed, _atom("entry"))
    ET.SubElement(entry, _atom("id")).text = "http://arxiv.org/api/errors#" + re.sub(r"[^a-z0-9]+", "_",
                                                                                     message.lower())
    ET.SubElement(entry, _atom("title")).text = "Error"
    ET.SubElement(entry, _atom("summary")).text = message
    ET.SubElement(entry, _atom("updated")).text = updated
    return _serialize(feed)
