"""Small on-disk projects (a LaTeX source tree, a bibliography folder) written from a dict in tests."""

from __future__ import annotations

from pathlib import Path


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write each relative path's text under `root` (folders created) and return `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
