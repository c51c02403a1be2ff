"""Versioned prompt files: `version: <id>` on the first line, `{{name}}` placeholders in the body.

The version is recorded wherever the prompt's output is stored (judge_config, report traces), so a
prompt change is always a new version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_PLACEHOLDER_RE = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str

    def render(self, **values: object) -> str:
        def substitute(m: re.Match) -> str:
            if m.group(1) not in values:
                raise KeyError(f"prompt {self.version} needs a value for {m.group(1)}")
            return str(values[m.group(1)])

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
    return Prompt(name=name, version=m.group(1), template=body.strip() + "\n")
