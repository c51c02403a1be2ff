"""DEEPSCHOLAR_HTTP_* override every external-source client's timeout and retries; bad values are refused."""

from __future__ import annotations

import logging

import pytest

from deepscholar.http_guard import http_setting
from deepscholar.sources.arxiv import ArxivSource
from deepscholar.sources.openalex import OpenAlexSource


def test_clients_take_the_environment_only_where_the_caller_chose_nothing(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_RETRIES", "0")
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_BACKOFF_SECONDS", "0")
    arxiv = ArxivSource(api_url="http://127.0.0.1:9/api/query")
    assert (arxiv.max_retries, arxiv.timeout, arxiv.backoff_seconds) == (0, 2.5, 0.0)
    openalex = OpenAlexSource(base_url="http://127.0.0.1:9", max_retries=7)
    assert (openalex.max_retries, openalex.timeout, openalex.backoff_seconds) == (7, 2.5, 0.0)


def test_without_the_environment_each_client_keeps_its_own_defaults(monkeypatch):
    for name in ("DEEPSCHOLAR_HTTP_RETRIES", "DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS", "DEEPSCHOLAR_HTTP_BACKOFF_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    assert (ArxivSource().max_retries, ArxivSource().timeout) == (4, 30)
    assert (OpenAlexSource().max_retries, OpenAlexSource().backoff_seconds) == (5, 1.0)


@pytest.mark.parametrize(("kind", "raw"), [("retries", "-1"), ("timeout", "0"), ("backoff", "soon")])
def test_unusable_values_are_logged_and_ignored(monkeypatch, caplog, kind, raw):
    names = {"retries": "DEEPSCHOLAR_HTTP_RETRIES", "timeout": "DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS",
             "backoff": "DEEPSCHOLAR_HTTP_BACKOFF_SECONDS"}
    monkeypatch.setenv(names[kind], raw)
    with caplog.at_level(logging.WARNING, logger="deepscholar.http_guard"):
        assert http_setting(kind, None, 3) == 3
    assert names[kind] in caplog.text
