"""Licence lookups over real HTTP against the replay server's OAI-PMH route (the demo snapshot's papers are
half CC BY, half arXiv's non-exclusive licence): stored per paper, re-runs look up only what is missing, an
outage fails the step with nothing invented, and `deepscholar release licences` works on a sealed month."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.settings import replay_settings

from deepscholar import cli
from deepscholar.errors import InfrastructureError
from deepscholar.release.context import ReleaseContext
from deepscholar.release.licences import fetch_licences
from deepscholar.release.spec import ReleaseSpec
from deepscholar.replay.demo_snapshot import ARXIV_NONEXCLUSIVE, CC_BY, write_demo_snapshot
from deepscholar.replay.server import ReplayServer

RELEASE = "2025-06"
KEPT = [f"2506.{1000 + n:05d}" for n in range(1, 7)]  # the demo's first six candidates
MISSING = "2506.09999"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("licence_snapshot")
    write_demo_snapshot(path, month=RELEASE)
    return path


def _seed(engine, ids: list[str], sealed: bool = False) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO releases (release_id, status, config) VALUES (:r, 'building', '{}')"),
                     {"r": RELEASE})
        conn.execute(sa.text("""
            INSERT INTO release_queries (release_id, arxiv_id, title, abstract, section_raw_latex, section_text,
                                         word_count) VALUES (:r, :a, 'T', 'A', 'x', 'x', 1)"""),
            [{"r": RELEASE, "a": a} for a in ids])
        if sealed:
            conn.execute(sa.text("""UPDATE releases SET status = 'published', published_at = now(),
                                    manifest_hash = release_manifest_hash(release_id) WHERE release_id = :r"""),
                         {"r": RELEASE})


def _stored(engine) -> dict[str, tuple]:
    with engine.connect() as conn:
        return {r.arxiv_id: (r.license, r.error) for r in conn.execute(sa.text("SELECT * FROM paper_licences"))}


def test_licences_are_fetched_once_per_paper_and_a_missing_record_is_recorded(engine, snapshot):
    _seed(engine, [*KEPT, MISSING])
    with ReplayServer(snapshot) as server:
        ctx = ReleaseContext(engine, RELEASE, ReleaseSpec(), replay_settings(server))
        counts = fetch_licences(ctx)
        oai = [r for r in server.requests if r.path == "/oai2"]
        assert len(oai) == 7 and all("metadataPrefix=arXiv" in r.query and r.status == 200 for r in oai)
        stored = _stored(engine)
        for n, arxiv_id in enumerate(KEPT, start=1):
            assert stored[arxiv_id] == (CC_BY if n % 2 == 0 else ARXIV_NONEXCLUSIVE, None)
        assert stored[MISSING][0] is None and stored[MISSING][1].startswith("idDoesNotExist")
        assert counts == {"looked_up": 7, "papers": 7, "redistributable": 3, "not_redistributable": 3,
                          "unknown": 1, "never_fetched": 0}
        # A re-run asks again only for the paper whose lookup found no record.
        server.clear_requests()
        assert fetch_licences(ctx)["looked_up"] == 1
        assert [r.query.count(MISSING) for r in server.requests] == [1]


def test_an_oai_outage_fails_the_step_and_stores_nothing_for_the_paper(engine, snapshot, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_RETRIES", "1")
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_BACKOFF_SECONDS", "0")
    _seed(engine, KEPT[:2])
    with ReplayServer(snapshot) as server:
        server.inject_failures("/oai2", [None, 503, 503])  # the first paper answers, then the host is down
        with pytest.raises(InfrastructureError, match="OAI-PMH"):
            fetch_licences(ReleaseContext(engine, RELEASE, ReleaseSpec(), replay_settings(server)))
        assert set(_stored(engine)) == {KEPT[0]}  # the retry carries on from the second
        assert fetch_licences(ReleaseContext(engine, RELEASE, ReleaseSpec(), replay_settings(server)))["looked_up"] == 1


def test_the_cli_fetches_licences_of_a_published_sealed_month(engine, snapshot, monkeypatch, capsys):
    _seed(engine, KEPT[:3], sealed=True)
    with ReplayServer(snapshot) as server:
        monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
        monkeypatch.setenv("DEEPSCHOLAR_ARXIV_OAI_URL", server.oai_url)
        monkeypatch.setenv("DEEPSCHOLAR_ARXIV_DELAY_SECONDS", "0")
        assert cli.main(["release", "licences", RELEASE]) == 0
    out = capsys.readouterr().out
    assert "3 query papers (3 looked up now): 1 allow redistribution, 2 do not" in out
    assert len(_stored(engine)) == 3
    assert cli.main(["release", "licences", "2031-01"]) == 2  # an unknown month: one line, exit 2
