"""A report's system build: what the system that wrote it was, stored whole on every report.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.build`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deepscholar.search import registry as search_registry
from deepscholar.settings import current_settings

__all__ = ["ENDPOINT_KEYS", "LOCATION_KEYS", "RUN_KEYS", "SystemBuild", "config_hash", "import_build",
           "search_backend"]

# Where and how to reach a system, not what it is: they may change under the same name (a service moved,
# a key renamed, a longer timeout). Every other config key defines the system's output.
LOCATION_KEYS = frozenset({"endpoint", "api_base", "api_key_env", "timeout", "attempts", "retry_wait"})
# The location keys that say which server answers, and with whose key. Changing one is the operator's
# (`deepscholar systems add`, never the page) and counts as a new build: `systems.endpoint_revision` goes up
# by one (systems/registry.py add_system), and reports written from then on name it (`+endpoint<N>`).
ENDPOINT_KEYS = frozenset({"endpoint", "api_base", "api_key_env"})
# Both declared here rather than in systems/registry.py, which applies them on registration: the registry
# needs the system kinds (systems/base.py), which need this module.

# Config keys that change how a system runs, never what it writes: not part of its build.
RUN_KEYS = LOCATION_KEYS | {"concurrency"}
CONFIG_HASH_CHARS = 8


def config_hash(config: dict[str, Any]) -> str:
    """The first characters of the sha256 of the config as sorted, compact JSON (stable across runs)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:CONFIG_HASH_CHARS]


def search_backend(config: Mapping[str, Any]) -> str:
    """The search backend a system with `config` writes its reports with in this process: the config's
    `search` key, else DEEPSCHOLAR_SEARCH_BACKEND, else the registry's default (as generation resolves it)."""
    name = config.get("search", current_settings().search_backend)
    return str(name or search_registry.DEFAULT).strip().lower()


@dataclass(frozen=True)
class SystemBuild:
    """One build; `label` is the stored string, `detail` the stored parts."""

    kind: str
    version: str  # as registered (systems.version)
    code: str | None = None  # the kind's code version (System.version)
    prompts: dict[str, str] = field(default_factory=dict)  # role -> prompt version
    models: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)  # output-defining config, defaults resolved
    import_format: str | None = None
    import_format_version: str | None = None
    search: str | None = None  # the search backend, for a kind that searches (search_backend)
    endpoint_revision: int = 0  # how often an operator moved the system since registration

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)

    def label(self) -> str:
        parts = [f"{self.kind}:{self.version}"]
        if self.import_format is not None:
            return "+".join([*parts, f"import({self.import_format}@{self.import_format_version or '?'})"])
        parts.append(f"code{self.code}")
        if self.prompts:
            parts.append(f"prompts({','.join(self._short(v) for _, v in sorted(self.prompts.items()))})")
        if self.models:
            parts.append(f"model({','.join(self.models)})")
        if self.search is not None and self.search != search_registry.DEFAULT and "search" not in self.config:
            parts.append(f"search({self.search})")
        if self.endpoint_revision:
            parts.append(f"endpoint{self.endpoint_revision}")
        parts.append(f"cfg{self.config_hash}")
        return "+".join(parts)

    def _short(self, prompt_version: str) -> str:
        """`deepscholar_base_rank_v1` -> `rank_v1`; `search_agent_v1` stays whole (`v1` alone says nothing)."""
        rest = prompt_version.removeprefix(f"{self.kind}_")
        return prompt_version if re.fullmatch(r"v\d.*", rest) else rest

    def detail(self) -> dict[str, Any]:
        if self.import_format is not None:
            return {"kind": self.kind, "registered_version": self.version,
                    "import": {"format": self.import_format, "format_version": self.import_format_version}}
        detail: dict[str, Any] = {"kind": self.kind, "registered_version": self.version, "code_version": self.code,
                  "prompts": dict(sorted(self.prompts.items())), "models": list(self.models),
                  "config": self.config, "config_hash": self.config_hash}
        if self.search is not None:
            detail["search_backend"] = self.search
        if self.endpoint_revision:
            detail["endpoint_revision"] = self.endpoint_revision
        return detail


def import_build(registered_version: str, fmt: str, fmt_version: str | None) -> SystemBuild:
    """The build of a report imported from a file of format `fmt` (formats/base.py ImportFormat.version)."""
    return SystemBuild(kind="external", version=registered_version, import_format=fmt,
                       import_format_version=fmt_version)
