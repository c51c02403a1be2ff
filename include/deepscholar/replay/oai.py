"""OAI-PMH answers of the replay server: GetRecord in arXiv's `arXiv` metadata format, and the protocol's
errors, so the real licence client (sources/oai.py) runs offline against a snapshot.

A snapshot entry may carry `license` (a licence URL); an entry without one is answered with no <license>
element, as arXiv does for old papers.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

__all__ = ["oai_error", "oai_record"]

OAI_NS = "http://www.openarchives.org/OAI/2.0/"
ARXIV_NS = "http://arxiv.org/OAI/arXiv/"
# No ET.register_namespace: it is process-wide and would change the prefixes of the Atom feeds (atom.py).


def _envelope(args: dict[str, str], response_date: str) -> ET.Element:
    root = ET.Element(f"{{{OAI_NS}}}OAI-PMH")
    ET.SubElement(root, f"{{{OAI_NS}}}responseDate").text = response_date
    request = ET.SubElement(root, f"{{{OAI_NS}}}request", {k: v for k, v in sorted(args.items())})
    request.text = "http://export.arxiv.org/oai2"
    return root


def _bytes(root: ET.Element) -> bytes:
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def oai_error(code: str, message: str, args: dict[str, str], response_date: str) -> bytes:
    """An OAI-PMH error answer (sent with HTTP 200, as the protocol says)."""
    root = _envelope(args, response_date)
    ET.SubElement(root, f"{{{OAI_NS}}}error", {"code": code}).text = message
    return _bytes(root)


def oai_record(entry: dict, base_id: str, args: dict[str, str], response_date: str) -> bytes:
    """GetRecord of one paper (its latest version's entry) in the `arXiv` metadata format."""
    root = _envelope(args, response_date)
    record = ET.SubElement(ET.SubElement(root, f"{{{OAI_NS}}}GetRecord"), f"{{{OAI_NS}}}record")
    header = ET.SubElement(record, f"{{{OAI_NS}}}header")
    ET.SubElement(header, f"{{{OAI_NS}}}identifier").text = f"oai:arXiv.org:{base_id}"
    ET.SubElement(header, f"{{{OAI_NS}}}datestamp").text = (entry.get("updated") or entry["published"])[:10]
    primary = entry.get("primary_category") or ""
    ET.SubElement(header, f"{{{OAI_NS}}}setSpec").text = primary.split(".")[0]
    meta = ET.SubElement(ET.SubElement(record, f"{{{OAI_NS}}}metadata"), f"{{{ARXIV_NS}}}arXiv")
    ET.SubElement(meta, f"{{{ARXIV_NS}}}id").text = base_id
    ET.SubElement(meta, f"{{{ARXIV_NS}}}created").text = entry["published"][:10]
    authors = ET.SubElement(meta, f"{{{ARXIV_NS}}}authors")
    for name in entry.get("authors", []):
        ET.SubElement(ET.SubElement(authors, f"{{{ARXIV_NS}}}author"), f"{{{ARXIV_NS}}}keyname").text = name
    ET.SubElement(meta, f"{{{ARXIV_NS}}}title").text = entry.get("title", "")
    ET.SubElement(meta, f"{{{ARXIV_NS}}}categories").text = " ".join(entry.get("categories", []))
    if entry.get("license"):
        ET.SubElement(meta, f"{{{ARXIV_NS}}}license").text = entry["license"]
    ET.SubElement(meta, f"{{{ARXIV_NS}}}abstract").text = entry.get("summary", "")
    return _bytes(root)
