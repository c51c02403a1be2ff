"""The system-kind registry: every kind in the systems package is found without a list, a kind declared
outside it joins with @register_system, and an unknown or taken kind is refused loudly."""

from __future__ import annotations

import pytest

from deepscholar.errors import InvalidInput, NotFound
from deepscholar.systems.base import (
    Report,
    System,
    SystemContext,
    make_system,
    register_system,
    registered_system,
    system_kind,
    system_kinds,
)

BUILT_IN = {"deepscholar_base", "external", "extractive", "human_exemplar", "oracle", "search_agent"}


def test_every_kind_of_the_package_is_discovered():
    kinds = system_kinds()
    assert BUILT_IN <= set(kinds)
    assert all(issubclass(cls, System) and cls.kind == kind for kind, cls in kinds.items())
    assert kinds["external"].__module__ == "deepscholar.systems.external.http_system"  # subpackages too


def test_an_unknown_kind_is_refused_naming_the_known_ones():
    with pytest.raises(NotFound, match=r"unknown system kind 'extractiv'; known: deepscholar_base, external, "
                                       r"extractive, human_exemplar, oracle, search_agent"):
        make_system("x", "extractiv", {}, SystemContext(engine=None))
    with pytest.raises(LookupError):  # callers catching LookupError keep working
        system_kind("extractiv")


class _Echo(System):
    kind = "test_registry_echo"
    uses_search = False

    def generate(self, query, search=None) -> Report:
        return Report(text=query.title, sources=[])


def test_a_kind_declared_outside_the_package_joins_for_a_block():
    with registered_system(_Echo):
        assert system_kind("test_registry_echo") is _Echo
        assert isinstance(make_system("echo", "test_registry_echo", {}, SystemContext(engine=None)), _Echo)
    assert "test_registry_echo" not in system_kinds()


def test_a_taken_or_malformed_kind_is_refused():
    with pytest.raises(InvalidInput, match="system kind 'extractive' is already registered by deepscholar.systems.extractive"):
        register_system("extractive")(type("Other", (System,), {}))
    with pytest.raises(InvalidInput, match="lower_snake_case"):
        register_system("Not A Kind")(type("Other", (System,), {}))
    with pytest.raises(InvalidInput, match="subclass of deepscholar.systems.base.System"):
        register_system("not_a_system")(type("Other", (), {}))
    assert system_kind("extractive").__module__ == "deepscholar.systems.extractive"
