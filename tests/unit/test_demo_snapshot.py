import gzip
import io
import json
import re
import tarfile
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from deepscholar.replay.demo_snapshot import main, write_demo_snapshot
from deepscholar.sources.venues import detect_venue
from deepscholar.text import arxiv_id_lower_bound_date, strip_arxiv_version

REASONS = {"not_v1", "no_venue", "no_source_pdf", "no_related_work", "too_many_words", "too_few_references"}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("demo")
    write_demo_snapshot(dest)
    return dest


def _manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def test_two_generations_are_byte_identical(tmp_path):
    first = write_demo_snapshot(tmp_path / "a")
    second = write_demo_snapshot(tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert first.sha256 == second.sha256
    # Rewriting in place replaces the generator's files and keeps the digest.
    (tmp_path / "a" / "eprint" / "stale").write_bytes(b"old")
    assert write_demo_snapshot(tmp_path / "a").sha256 == first.sha256
    assert not (tmp_path / "a" / "eprint" / "stale").exists()


def test_layout_and_manifest(snapshot):
    manifest = _manifest(snapshot)
    assert manifest["month"] == "2025-06"
    assert manifest["generator"] == "demo_snapshot" and manifest["version"] == 1
    assert len(manifest["categories"]) >= 3
    assert (snapshot / "arxiv" / "entries.jsonl").is_file()
    assert (snapshot / "openalex" / "works.jsonl").is_file()
    for arxiv_id, details in manifest["papers"].items():
        assert (snapshot / "eprint" / details["versioned_id"]).is_file()
        assert manifest["expected"][arxiv_id] == details["outcome"]


def test_expected_outcomes_cover_every_filter(snapshot):
    expected = _manifest(snapshot)["expected"]
    assert len(expected) >= 14
    counts = Counter(expected.values())
    assert set(counts) == REASONS | {"kept"}
    assert counts["kept"] >= 6


def test_candidates_are_in_the_month_and_categories(snapshot):
    manifest = _manifest(snapshot)
    entries = {e["id"]: e for e in _jsonl(snapshot / "arxiv" / "entries.jsonl")}
    start, end = _when(manifest["window"]["start"]), _when(manifest["window"]["end"])
    for arxiv_id in manifest["expected"]:
        versions = sorted(k for k in entries if strip_arxiv_version(k)[0] == arxiv_id)
        assert versions, arxiv_id
        for vid in versions:
            entry = entries[vid]
            assert start <= _when(entry["published"]) < end
            assert set(entry["categories"]) & set(manifest["categories"])
    for arxiv_id in manifest["distractors"]:
        entry = entries[f"{arxiv_id}v1"]
        published = _when(entry["published"])
        assert not (start <= published < end) or not set(entry["categories"]) & set(manifest["categories"])


def test_each_candidate_has_the_trait_its_outcome_names(snapshot):
    manifest = _manifest(snapshot)
    entries = {e["id"]: e for e in _jsonl(snapshot / "arxiv" / "entries.jsonl")}
    papers = manifest["papers"]
    by_outcome: dict[str, list[str]] = {}
    for arxiv_id, details in papers.items():
        by_outcome.setdefault(details["outcome"], []).append(arxiv_id)
        latest = entries[details["versioned_id"]]
        venue = detect_venue(latest["comment"], latest["journal_ref"])
        if details["outcome"] == "no_venue":
            assert venue is None, latest["comment"]
        else:
            assert venue is not None, (arxiv_id, latest["comment"], latest["journal_ref"])

    (v2,) = by_outcome["not_v1"]
    assert papers[v2]["versioned_id"].endswith("v2") and f"{v2}v1" in entries

    no_venue_comments = {entries[papers[i]["versioned_id"]]["comment"] for i in by_outcome["no_venue"]}
    assert {"Under review at NeurIPS 2025", "Submitted to EMNLP 2025", "12 pages, 4 figures"} <= no_venue_comments

    (pdf,) = by_outcome["no_source_pdf"]
    assert (snapshot / "eprint" / f"{pdf}v1").read_bytes().startswith(b"%PDF")

    (long,) = by_outcome["too_many_words"]
    assert papers[long]["approx_words"] > 1200
    for arxiv_id in by_outcome["kept"]:
        assert papers[arxiv_id]["approx_words"] <= 700
        assert len(papers[arxiv_id]["cite_keys"]) >= 8

    (few,) = by_outcome["too_few_references"]
    assert len(papers[few]["cite_keys"]) < 5

    (none,) = by_outcome["no_related_work"]
    tex = _tar_members(snapshot / "eprint" / f"{none}v1")["main.tex"].decode()
    assert not re.search(r"^\\(sub)*section\*?\{[^}]*related", tex, flags=re.I | re.M)
    assert "% \\section{Related Work}" in tex


def _tar_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_source_kinds_and_latex_variants(snapshot):
    papers = _manifest(snapshot)["papers"]
    kinds = Counter(p["source"] for p in papers.values())
    assert kinds["gz"] >= 1 and kinds["pdf"] >= 1 and kinds["tar.gz"] >= 10

    tex_by_paper = {}
    for arxiv_id, details in papers.items():
        raw = (snapshot / "eprint" / details["versioned_id"]).read_bytes()
        if details["source"] == "tar.gz":
            members = _tar_members(snapshot / "eprint" / details["versioned_id"])
            with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
                for member in tar.getmembers():
                    assert member.mtime == 0 and member.uname == "" and member.uid == 0
        elif details["source"] == "gz":
            assert raw[:2] == b"\x1f\x8b"
            members = {"main.tex": gzip.decompress(raw)}
            assert b"\\begin{thebibliography}" in members["main.tex"]
        else:
            continue
        tex_by_paper[arxiv_id] = members
        if details["outcome"] == "kept":
            assert details["section_file"] in members

    all_tex = "\n".join(m.decode() for members in tex_by_paper.values() for n, m in members.items()
                        if n.endswith(".tex"))
    for construct in [r"\section{Related Work}", r"\section*{Related Work}", r"\section{Background and Related Work}",
                      r"\subsection{Related Work}", r"\input{tex/related}", r"\citep{", r"\citet{", r"\cite{",
                      r"\begin{table}", r"\citep[see][]{"]:
        assert construct in all_tex, construct
    assert re.search(r"\\cite[pt]?\{[^}]*,[^}]*\}", all_tex), "multi-key citations"

    bbl_only = [m for m in tex_by_paper.values() if "main.bbl" in m]
    assert bbl_only and not any(n.endswith(".bib") for n in bbl_only[0])
    evil = [m for m in tex_by_paper.values() if "../evil.tex" in m]
    assert len(evil) == 1 and "main.tex" in evil[0] and "references.bib" in evil[0]


def test_references(snapshot):
    manifest = _manifest(snapshot)
    month_start = _when(manifest["window"]["start"])
    entries = _jsonl(snapshot / "arxiv" / "entries.jsonl")
    works = _jsonl(snapshot / "openalex" / "works.jsonl")
    refs = manifest["references"]
    assert 75 <= refs["total"] <= 90
    assert refs["openalex_only"] >= 8 and refs["on_arxiv"] >= 55
    assert len(works) == refs["total"] - len(refs["unresolvable"])

    candidate_ids = set(manifest["expected"]) | set(manifest["distractors"])
    ref_entries = [e for e in entries if strip_arxiv_version(e["id"])[0] not in candidate_ids]
    assert len({strip_arxiv_version(e["id"])[0] for e in ref_entries}) == refs["on_arxiv"]
    for entry in ref_entries:
        assert _when(entry["published"]) < month_start
        lower = arxiv_id_lower_bound_date(entry["id"])
        assert lower is None or lower <= _when(entry["published"]).date()
    assert any("/" in e["id"] for e in ref_entries), "an old-style id"
    assert any(e["id"].endswith("v2") for e in ref_entries)

    for work in works:
        assert work["id"].startswith("https://openalex.org/W") and work["doi"].startswith("https://doi.org/")
        assert work["abstract_inverted_index"] and isinstance(work["cited_by_count"], int)
    journal_only = [w for w in works if not any("arxiv.org" in (loc.get("landing_page_url") or "")
                                                for loc in w["locations"])]
    assert len(journal_only) == refs["openalex_only"]


def test_bib_styles_cover_every_way_of_naming_a_reference(snapshot):
    papers = _manifest(snapshot)["papers"]
    kept_refs = [r for p in papers.values() if p["outcome"] == "kept" for r in p["references"].values()]
    styles = Counter(r["bib_style"] for r in kept_refs)
    assert {"eprint", "url", "arxiv_doi", "journal_arxiv", "journal_doi", "title_only", "venue_doi"} <= set(styles)
    how = Counter(r["resolvable_by"] for r in kept_refs)
    assert {"arxiv_id", "arxiv_title", "openalex_doi", "openalex_title", "unresolvable"} <= set(how)


def _content_words(text: str) -> set[str]:
    stop = {"the", "and", "with", "for", "that", "this", "from", "into", "over", "their", "when", "which", "than",
            "our", "are", "its", "each", "show", "shows", "work", "paper", "method", "methods", "approach"}
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3 and w not in stop}


def test_text_is_topical(snapshot):
    """A paper's abstract shares more vocabulary with the references it cites than with other themes."""
    manifest = _manifest(snapshot)
    entries = {strip_arxiv_version(e["id"])[0]: e for e in _jsonl(snapshot / "arxiv" / "entries.jsonl")}
    works = {w["id"].rsplit("/", 1)[-1]: w for w in _jsonl(snapshot / "openalex" / "works.jsonl")}
    by_theme: dict[str, set[str]] = {}
    for p in manifest["papers"].values():
        by_theme.setdefault(p["theme"], set()).update(r["openalex_id"] for r in p["references"].values()
                                                      if r["openalex_id"])

    def work_words(openalex_id: str) -> set[str]:
        return _content_words(works[openalex_id]["title"])

    for arxiv_id, p in manifest["papers"].items():
        if p["outcome"] != "kept":
            continue
        abstract = _content_words(entries[arxiv_id]["summary"] + " " + entries[arxiv_id]["title"])
        own = [r["openalex_id"] for r in p["references"].values() if r["openalex_id"]]
        others = [w for theme, ids in by_theme.items() if theme != p["theme"] for w in ids]
        own_overlap = sum(len(abstract & work_words(w)) for w in own) / len(own)
        other_overlap = sum(len(abstract & work_words(w)) for w in others) / len(others)
        assert own_overlap > 2 * other_overlap, (arxiv_id, own_overlap, other_overlap)


def test_other_months_and_cli(tmp_path, capsys):
    summary = write_demo_snapshot(tmp_path / "dec", month="2024-12")
    manifest = _manifest(tmp_path / "dec")
    assert manifest["window"] == {"start": "2024-12-01T00:00:00Z", "end": "2025-01-01T00:00:00Z"}
    assert all(k.startswith("2412.") for k in manifest["expected"])
    assert summary.n_expected_kept >= 6

    assert main([str(tmp_path / "cli")]) == 0
    assert "2025-06" in capsys.readouterr().out
    assert (tmp_path / "cli" / "manifest.json").is_file()
    with pytest.raises(ValueError):
        write_demo_snapshot(tmp_path / "bad", month="2025-13")
