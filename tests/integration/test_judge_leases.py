"""Leases on judgments (evaluation/judging/_leases.py) on real PostgreSQL: two holders, expiry, renewal, release,
idempotence, and the wait for another holder's reports at the end of a run."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import sqlalchemy as sa
from support.warehouse import one_query_release

from deepscholar import db
from deepscholar.evaluation.judging import _leases as leases
from deepscholar.evaluation.metrics import get_metric

MONTH = "2025-06"
JUDGE = "llm:openai/claims-judge"
A, B = "host-a:1:aaaa", "host-b:2:bbbb"


@pytest.fixture
def metric():
    return get_metric("organization")


@pytest.fixture
def reports(engine) -> list[int]:
    """Six ok reports (and one failed one) of a published month; their report ids in order."""
    with engine.begin() as conn:
        one_query_release(conn, MONTH, "2506.00001")
        systems = [f"s{i}" for i in range(7)]
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive", "config": {}} for s in systems],
                  key=["system_id"])
        db.upsert(conn, "reports", [{"release_id": MONTH, "system_id": s, "arxiv_id": "2506.00001",
                                     "status": "ok" if i < 6 else "system_error", "text": "Prior work [1]."}
                                    for i, s in enumerate(systems)], key=["release_id", "system_id", "arxiv_id"])
        return list(conn.execute(sa.text(
            "SELECT report_id FROM reports WHERE status = 'ok' ORDER BY system_id")).scalars())


def _rows(engine) -> dict[int, tuple[str, bool]]:
    """report_id -> (holder, lease still live)."""
    with engine.connect() as conn:
        return {r: (h, live) for r, h, live in conn.execute(sa.text(
            "SELECT report_id, holder, lease_expires_at > now() FROM judge_claims ORDER BY 1"))}


def _score(engine, metric, report_ids) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "metric_scores", [{"report_id": r, "metric": metric.name, "judge_config": JUDGE,
                                           "variant": metric.headline, "metric_version": metric.version,
                                           "value": 1.0, "n_items": 1, "details": {}} for r in report_ids],
                  key=["report_id", "metric", "judge_config", "variant"])


def test_two_holders_split_a_month_and_claiming_again_is_idempotent(engine, metric, reports):
    first, rest = reports[:4], reports[2:]
    assert leases.take_leases(engine, metric, JUDGE, first, holder=A) == first
    assert leases.take_leases(engine, metric, JUDGE, rest, holder=B) == reports[4:]  # A's live leases are skipped
    assert {r: h for r, (h, _) in _rows(engine).items()} == {**dict.fromkeys(first, A), **dict.fromkeys(reports[4:], B)}
    with engine.connect() as conn:
        claimed_at = conn.execute(sa.text("SELECT claimed_at FROM judge_claims WHERE holder = :h"), {"h": A}).all()
    # Claiming again what one holds (a retry in the same process) succeeds and keeps the first claim time.
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=A) == first
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT claimed_at FROM judge_claims WHERE holder = :h"), {"h": A}).all() \
            == claimed_at
    # Another metric or judge config is another claim.
    assert leases.take_leases(engine, metric, "llm:openai/other", first, holder=B) == first
    assert leases.take_leases(engine, get_metric("relevance_rate"), JUDGE, first, holder=B) == first


def test_only_pending_ok_reports_are_claimed(engine, metric, reports):
    _score(engine, metric, reports[:2])
    with engine.connect() as conn:
        failed = conn.execute(sa.text("SELECT report_id FROM reports WHERE status <> 'ok'")).scalar_one()
    assert leases.take_leases(engine, metric, JUDGE, [*reports, failed], holder=A) == reports[2:]


def test_an_expired_lease_is_taken_over(engine, metric, reports):
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=A, lease_seconds=0.3) == reports
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=B) == []
    time.sleep(0.4)
    assert leases.take_leases(engine, metric, JUDGE, reports[:3], holder=B) == reports[:3]
    rows = _rows(engine)
    assert [rows[r][0] for r in reports] == [B] * 3 + [A] * 3
    assert all(live for r, (_, live) in rows.items() if r in reports[:3])


def test_renewal_keeps_a_lease_and_the_heartbeat_renews_while_in_use(engine, metric, reports, monkeypatch):
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=A, lease_seconds=0.3) == reports
    assert leases.renew(engine, holder=A, lease_seconds=5) == len(reports)
    time.sleep(0.4)
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=B) == []

    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_CLAIM_LEASE_SECONDS", "0.6")  # heartbeat every 0.2 s
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=B, lease_seconds=0) == []
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM judge_claims"))
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=A) == reports
    leases.HEARTBEAT.join(engine, A)
    try:
        time.sleep(1.5)  # two and a half leases: only the heartbeat keeps them
        assert leases.take_leases(engine, metric, JUDGE, reports, holder=B) == []
    finally:
        leases.HEARTBEAT.leave(engine, A)
    time.sleep(0.8)  # no renewal any more: the leases run out
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=B) == reports


def test_release_deletes_only_the_holders_own_rows(engine, metric, reports):
    leases.take_leases(engine, metric, JUDGE, reports[:3], holder=A)
    leases.take_leases(engine, metric, JUDGE, reports[3:], holder=B)
    assert leases.return_leases(engine, metric.name, JUDGE, reports, holder=B) == 3
    assert leases.return_leases(engine, metric.name, JUDGE, reports, holder=B) == 0
    assert set(_rows(engine)) == set(reports[:3])
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=B) == reports[3:]
    assert leases.return_leases(engine, metric.name, JUDGE, reports[:3], holder=A) == 3
    assert leases.take_leases(engine, metric, JUDGE, reports, holder=B) == reports


def test_chunks_skip_what_another_holds_then_wait_for_it(engine, metric, reports, caplog):
    """B's run: A holds two reports; B judges the other four, then waits and logs once. A scores one and
    releases both without scoring the other (it failed): B takes that one over, and ends with none pending."""
    held_by_a = reports[1:3]
    assert leases.take_leases(engine, metric, JUDGE, held_by_a, holder=A) == held_by_a
    seen: list[list[int]] = []

    def a_finishes() -> None:
        time.sleep(1.0)
        _score(engine, metric, held_by_a[:1])
        leases.return_leases(engine, metric.name, JUDGE, held_by_a, holder=A)

    caplog.set_level(logging.INFO, logger="deepscholar.evaluation")
    worker = threading.Thread(target=a_finishes)
    worker.start()
    with leases.Leases(engine, metric, JUDGE, "organization test", holder=B) as held:
        for ids in held.chunks(reports, 2):
            assert set(_rows(engine)) >= set(ids) and all(_rows(engine)[r][0] == B for r in ids)
            seen.append(ids)
            _score(engine, metric, ids)
    worker.join()
    assert seen == [reports[:1], reports[3:4], reports[4:], held_by_a[1:]]  # chunks of pending, less what A holds
    assert _rows(engine) == {}  # every claim released
    waits = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert waits == [f"organization test: waiting for 2 reports judged by another process (holder {A}, lease "
                     f"until {waits[0].split('lease until ')[1]}"]


def test_a_dead_holder_blocks_for_one_lease_at_most(engine, metric, reports):
    leases.take_leases(engine, metric, JUDGE, reports, holder=A, lease_seconds=0.8)  # then A dies: no renewal
    started = time.monotonic()
    got = leases.wait_for_turn(engine, metric, JUDGE, reports, holder=B, lease_seconds=0.8)
    assert got == reports and 0.5 < time.monotonic() - started < 3


def test_an_error_releases_the_chunk_in_hand(engine, metric, reports):
    with pytest.raises(RuntimeError), leases.Leases(engine, metric, JUDGE, holder=A) as held:
        for ids in held.chunks(reports, 4):
            assert set(_rows(engine)) == set(ids)
            raise RuntimeError("provider down")
    assert _rows(engine) == {}
    assert leases.wait_for_turn(engine, metric, JUDGE, reports, holder=B) == reports  # nothing to wait for


def test_holders_racing_for_one_chunk_get_each_report_once(engine, metric, reports):
    """Eight holders claim the same reports at the same moment (in both orders), renewing as they go, then
    release half: every report went to exactly one of them, and no statement failed (no deadlock)."""
    holders = [f"host:{i}:race" for i in range(8)]
    barrier = threading.Barrier(len(holders))
    got: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def race(holder: str, ids: list[int]) -> None:
        try:
            barrier.wait()
            got[holder] = leases.take_leases(engine, metric, JUDGE, ids, holder=holder)
            leases.renew(engine, holder=holder)
            barrier.wait()  # a report released (and still pending) may be claimed again: not before all claimed
            leases.return_leases(engine, metric.name, JUDGE, got[holder][::2], holder=holder)
            leases.renew(engine, holder=holder)
        except BaseException as exc:  # noqa: BLE001  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(h, reports if i % 2 else reports[::-1]))
               for i, h in enumerate(holders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    won = [r for ids in got.values() for r in ids]
    assert sorted(won) == reports  # each report to one holder
    assert set(_rows(engine)) == {r for ids in got.values() for r in ids[1::2]}
