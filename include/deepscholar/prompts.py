"""Versioned prompt files: `version: <id>` on the first line, `{{name}}` placeholders in the body.

Design notes: docs/MODULE_NOTES.md, `deepscholar.prompts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_PLACEHOLDER_RE = re.compile(r"\{\{(\w+)\}\}")
FENCE_OPEN, FENCE_CLOSE = "<<<", ">>>"
_FENCE_RUN_RE = re.compile(r"<{3,}|>{3,}")


def neutralise_fences(text: str) -> str:
    """`>>>` -> `> > >` (and `<<<`, longer runs alike): the text can no longer open or close a fence."""
    return _FENCE_RUN_RE.sub(lambda m: " ".join(m.group(0)), text)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str
    fenced: bool = False  # values are quoted data: fence sequences in them are broken up

    def render(self, **values: object) -> str:
        def substitute(m: re.Match) -> str:
            if m.group(1) not in values:
                raise KeyError(f"prompt {self.version} needs a value for {m.group(1)}")
            text = str(values[m.group(1)])
            return neutralise_fences(text) if self.fenced else text

        # One pass, so braces inside substituted text (a section quoting JSON) are never expanded.
        return _PLACEHOLDER_RE.sub(substitute, self.template)


@cache
def load_prompt_file(package: str, name: str) -> Prompt:
    """`<package>/prompts/<name>.txt`, e.g. load_prompt_file("deepscholar.release", "importance_v1")."""
    raw = resources.files(package).joinpath("prompts", f"{name}.txt").read_text("utf-8")
    first, _, body = raw.partition("\n")
    m = re.fullmatch(r"version:\s*(\S+)", first.strip())
    if not m:
        raise ValueError(f"prompt {name}.txt must start with a 'version: <id>' line")
    second, _, rest = body.partition("\n")
    fenced = second.strip().startswith("fence:")
    if fenced:
        if second.split(":", 1)[1].split() != [FENCE_OPEN, FENCE_CLOSE]:
            raise ValueError(f"prompt {name}.txt: the only fence is '{FENCE_OPEN} {FENCE_CLOSE}'")
        body = rest
    return Prompt(name=name, version=m.group(1), template=body.strip() + "\n", fenced=fenced)
