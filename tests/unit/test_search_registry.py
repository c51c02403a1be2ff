"""The search-backend registry: backends are found by their modules, an unknown name is refused with the
known ones, and a backend declared once is what make_search uses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.search import Backend, backend_names, make_search, registry
from deepscholar.search.local import LocalSearch


class _Scope:
    arxiv_id = "2501.00001"
    cutoff = datetime(2025, 1, 1, tzinfo=UTC)


def test_every_backend_module_is_found():
    assert backend_names() == ("arxiv", "local", "local_tsrank")


def test_an_unknown_backend_is_refused_naming_the_known_ones():
    with pytest.raises(InvalidInput, match=r"unknown search backend 'google'; known: arxiv, local"):
        make_search("google", None, _Scope())


def test_the_default_backend_is_local_and_excludes_the_query_paper():
    search = make_search(None, None, _Scope(), exclude_ids=["2401.00002v2"])
    assert isinstance(search, LocalSearch) and search.exclude_ids == ["2401.00002", "2501.00001"]


class _Fixed:
    name = "fixed"

    def __init__(self, cutoff, exclude_ids, **kw):
        self.cutoff, self.exclude_ids, self.kw = cutoff, tuple(exclude_ids), kw

    def search(self, text, k=10):
        return []


def test_a_backend_declared_once_is_what_make_search_uses():
    backend = Backend("fixed", lambda engine, cutoff, exclude_ids, **kw: _Fixed(cutoff, exclude_ids, **kw))
    with registry.registered(backend):
        search = make_search("Fixed ", None, _Scope(), option=1)
        assert isinstance(search, _Fixed)
        assert (search.cutoff, search.exclude_ids, search.kw) == (_Scope.cutoff, ("2501.00001",), {"option": 1})
    assert "fixed" not in backend_names()


@pytest.mark.parametrize(("backend", "error"), [
    (Backend("Bad Name", lambda *a, **k: None), "a backend name is lower-case"),
    (Backend("local", lambda *a, **k: None), "'local' is already registered"),
    (Backend("nocall", None), "`make` must be callable"),
])
def test_a_malformed_backend_is_refused(backend, error):
    with pytest.raises(InvalidInput, match=error):
        registry.register(backend)
    assert backend_names() == ("arxiv", "local", "local_tsrank")
