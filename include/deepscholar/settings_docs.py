"""Every setting as people read them: README's table (`deepscholar settings --markdown`) and the effective
values of an environment with where each comes from (`deepscholar settings`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from deepscholar.setting_kinds import shown
from deepscholar.settings import GROUPS, SETTINGS, Setting, Settings, current_settings

__all__ = ["effective_rows", "markdown_table"]


def _ordered() -> list[Setting]:
    return sorted(SETTINGS, key=lambda s: GROUPS.index(s.group))


def effective_rows(environ: Mapping[str, str] | None = None) -> list[tuple[str, str, str, str]]:
    """(group, variable, value, source) of every setting of `environ` (default: this process's)."""
    settings = current_settings() if environ is None else Settings.from_env(environ)
    environ = os.environ if environ is None else environ
    rows = []
    for s in _ordered():
        value = getattr(settings, s.name)
        # Unset: what that means (each client's own default, the Airflow connection, ...) when the docs say.
        text = shown(value) if value is not None or not s.shown_default else s.shown_default.replace("`", "")
        rows.append((s.group, s.env, text, s.source(environ)))
    return rows


def markdown_table() -> str:
    """README's table of every setting (`deepscholar settings --markdown`)."""
    lines = ["| variable | group | meaning | accepts | default |", "|---|---|---|---|---|"]
    for s in _ordered():
        tolerant = " (a malformed value is logged and ignored)" if s.tolerant else ""
        lines.append(f"| `{s.env}` | {s.group} | {s.doc} | {s.kind.expected}{tolerant} | {s.default_text()} |")
    return "\n".join(lines)
