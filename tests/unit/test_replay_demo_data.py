"""The demo snapshot's data files (replay/data/*.toml) and the builder that reads them."""

import json
import tomllib
from importlib import resources

from deepscholar.replay import demo_data
from deepscholar.replay.demo_snapshot import build_snapshot


def _data(name: str) -> dict:
    return tomllib.loads(resources.files("deepscholar.replay").joinpath("data", name).read_text(encoding="utf-8"))


def test_data_files_ship_as_package_data():
    names = {p.name for p in resources.files("deepscholar.replay").joinpath("data").iterdir()}
    assert {"demo_themes.toml", "demo_candidates.toml", "demo_names.toml"} <= names


def test_builder_output_is_deterministic():
    first_files, first_manifest = build_snapshot("2025-06")
    second_files, second_manifest = build_snapshot("2025-06")
    assert first_files == second_files and first_manifest == second_manifest
    other_files, _ = build_snapshot("2024-02")
    assert other_files["arxiv/entries.jsonl"] != first_files["arxiv/entries.jsonl"]


def test_themes_and_references_match_the_data_file():
    themes = _data("demo_themes.toml")["themes"]
    assert list(demo_data.THEMES) == list(themes)
    for slug, row in themes.items():
        theme = demo_data.THEMES[slug]
        assert [r[0] for r in theme.refs] == [r["slug"] for r in row["refs"]]
        assert all(0 <= r["group"] < len(row["groups"]) for r in row["refs"])
    ref_slugs = [r[0] for t in demo_data.THEMES.values() for r in t.refs]
    assert len(ref_slugs) == len(set(ref_slugs))
    roles = _data("demo_themes.toml")["reference_roles"]
    assert set(roles["venue_doi"]) | set(roles["multi_version"]) | {roles["old_style_id"]} <= set(ref_slugs)

    _, manifest = build_snapshot("2025-06")
    refs = manifest["references"]
    assert refs["total"] == len(ref_slugs) + 1  # + the unresolvable book
    assert refs["on_arxiv"] == sum(r["on_arxiv"] for t in themes.values() for r in t["refs"])
    assert refs["unresolvable"] == [_data("demo_themes.toml")["unresolvable_book"]["title"]]


def test_candidates_match_the_data_file():
    rows = _data("demo_candidates.toml")["candidates"]
    assert [c.num for c in demo_data.CANDIDATES] == [r["num"] for r in rows]
    known = {r[0] for t in demo_data.THEMES.values() for r in t.refs} | {demo_data.IIR_BOOK["slug"]}
    for spec in demo_data.CANDIDATES:
        assert spec.theme in demo_data.THEMES
        assert set(spec.cites) | set(spec.intro_cites) <= known

    files, manifest = build_snapshot("2025-06")
    assert manifest["expected"] == {f"2506.{1000 + r['num']:05d}": r["outcome"] for r in rows}
    for row in rows:
        paper = manifest["papers"][f"2506.{1000 + row['num']:05d}"]
        assert paper["comment"] == row.get("comment") and paper["traps"] == row.get("traps", [])
    entries = [json.loads(line) for line in files["arxiv/entries.jsonl"].decode().splitlines()]
    titles = {e["title"] for e in entries}
    assert {r["title"] for r in rows} <= titles
    distractors = _data("demo_candidates.toml")["distractors"]
    assert sorted(manifest["distractors"].values()) == sorted(d["reason"] for d in distractors)
    assert {d["title"] for d in distractors} <= titles


def test_names_and_escapes():
    names = _data("demo_names.toml")
    assert demo_data.FIRST_NAMES == names["first_names"] and demo_data.LAST_NAMES == names["last_names"]
    assert len(set(names["first_names"])) == len(names["first_names"])
    # Single non-ASCII letters, each to a braced LaTeX escape ("é" -> "{\\'e}").
    assert demo_data.LATEX_ESCAPES == names["latex_escapes"]
    for letter, escape in demo_data.LATEX_ESCAPES.items():
        assert len(letter) == 1 and ord(letter) > 127
        assert escape.startswith("{\\") and escape.endswith("}")
