"""Follow a built static site's links from index.html, as a reader (or a link checker) would."""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import unquote, urlsplit

from support.chromium import parse_html

__all__ = ["crawl", "EXTERNAL"]

EXTERNAL = ("http", "https", "mailto")


def crawl(root: Path) -> tuple[set[str], list[str]]:
    """Site paths reached from index.html by following href/src/action, and the links that reach no file."""
    seen: set[str] = set()
    broken: list[str] = []
    todo = ["index.html"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if not path.endswith(".html"):
            continue
        dom = parse_html((root / path).read_text())
        for el in dom.iter():
            for attr in ("href", "src", "action"):
                link = el.attrs.get(attr)
                if link is None or urlsplit(link).scheme in EXTERNAL or link.startswith("#"):
                    continue
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), unquote(urlsplit(link).path)))
                if target.startswith("..") or not (root / target).is_file():
                    broken.append(f"{path}: {attr}={link}")
                else:
                    todo.append(target)
    return seen, broken
