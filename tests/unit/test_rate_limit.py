"""The per-host slot: taken when free, otherwise the wait until it frees; services apart by base path."""

from deepscholar import rate_limit
from deepscholar.rate_limit import LocalSlots, service_key


def test_a_slot_is_taken_when_free_and_frees_one_interval_later():
    now = [100.0]
    slots = LocalSlots(clock=lambda: now[0])
    assert slots.take("h", 3.0) == 0.0
    assert slots.take("h", 3.0) == 3.0  # the second caller waits the whole interval
    now[0] += 1.0
    assert slots.take("h", 3.0) == 2.0
    assert slots.take("other", 3.0) == 0.0  # hosts are independent
    now[0] += 2.5  # a caller that wakes late takes the slot then, and the next interval counts from then
    assert slots.take("h", 3.0) == 0.0
    assert slots.take("h", 3.0) == 3.0


def test_arxiv_api_and_eprints_count_apart_even_on_one_server():
    assert service_key("http://127.0.0.1:8765/api/query") != service_key("http://127.0.0.1:8765/e-print")
    assert service_key("https://export.arxiv.org/api/query") == "export.arxiv.org/api/query"
    assert service_key("https://api.openalex.org") == "api.openalex.org"


def test_no_interval_takes_no_slot():
    rate_limit.use_warehouse(None)  # this process's slots
    rate_limit.wait_for_slot("unpaced.example", 0)
    assert rate_limit._LOCAL.take("unpaced.example", 1.0) == 0.0  # the 0-interval call took nothing
    rate_limit.wait_for_slot("paced.example", 5.0)
    assert rate_limit._LOCAL.take("paced.example", 5.0) > 4.0


def test_openalex_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(rate_limit.OPENALEX_INTERVAL_ENV, raising=False)
    assert rate_limit.openalex_interval() == rate_limit.DEFAULT_OPENALEX_INTERVAL
    monkeypatch.setenv(rate_limit.OPENALEX_INTERVAL_ENV, "0")
    assert rate_limit.openalex_interval() == 0.0
    monkeypatch.setenv(rate_limit.OPENALEX_INTERVAL_ENV, "fast")
    assert rate_limit.openalex_interval() == rate_limit.DEFAULT_OPENALEX_INTERVAL
