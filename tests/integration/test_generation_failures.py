"""Generation's audit trail and failure taxonomy, over real HTTP (OpenAI stub, arXiv stub) and PostgreSQL.

- LLM calls, tokens and cost stored on a report written by a fanning-out system (deepscholar_base's
  filter stage runs through LLMClient.map) equal what the stub served, at concurrency 1 and 16.
- Infrastructure failures (LLM provider down, search backend down) raise out of generate_pair and
  generate_batch, so the Airflow task fails and retries, and store nothing; a system's own exception
  is its system_error.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub
from test_llm_systems import base_brain

from deepscholar import db
from deepscholar.errors import InfrastructureError, MissingCredentials, SystemFailure
from deepscholar.search.local import LocalSearch
from deepscholar.systems.base import Report, Source, System, register_system
from deepscholar.systems.generation import generate_batch, generate_pair
from deepscholar.systems.registry import add_system

pytestmark = pytest.mark.slow  # builds a release, provider retries

RELEASE = "2025-06"
CUTOFF = datetime(2025, 6, 10, tzinfo=UTC)
QUERIES = ["2506.00001", "2506.00002"]
MODEL = "openai/gpt-4o-mini"  # a model litellm prices, so cost is checked too
KEY_ENV = "DEEPSCHOLAR_TEST_LLM_KEY"
DEAD_WAREHOUSE = "postgresql+psycopg2://postgres@127.0.0.1:9/nowhere"  # port 9 (discard): connection refused


@register_system("taxonomy_cites_one")
class CitesOne(System):
    uses_search = False

    def generate(self, query, search):
        return Report(text="Dense retrieval was studied [1].",
                      sources=[Source(idx=1, title="Dense retrieval", snippet="s", arxiv_id="2401.00001")])


@register_system("taxonomy_bad_output")
class BadOutput(System):
    """The system's own bug: a system_error, whatever its exception type."""

    uses_search = False

    def generate(self, query, search):
        raise ValueError("sources and text disagree")


@register_system("taxonomy_dead_search")
class DeadSearch(System):
    """Searches a warehouse that refuses connections, and wraps the failure in its own exception."""

    uses_search = False

    def generate(self, query, search):
        try:
            LocalSearch(db.get_engine(DEAD_WAREHOUSE), query.cutoff).search("dense retrieval")
        except Exception as exc:
            raise SystemFailure("search failed") from exc
        raise AssertionError("unreachable")


@pytest.fixture
def release(engine, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test")
    monkeypatch.setenv("DEEPSCHOLAR_SYSTEM_KEY_VARIABLES", KEY_ENV)  # the allow-list admits the test's variable
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_BACKEND", "local")
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [
            {"release_id": RELEASE, "arxiv_id": a, "title": f"Citation-aware writing {i}",
             "abstract": "We write related work with retrieval.", "published": CUTOFF, "section_raw_latex": "x",
             "section_text": "x", "word_count": 1} for i, a in enumerate(QUERIES)], key=["release_id", "arxiv_id"])
        # 12 papers match round 1's queries ("rag", "citations") and 12 others round 2's ("agents",
        # "benchmarks"): more than one filter batch of 10 per round, so the filter fans out in threads.
        db.upsert(conn, "corpus", [
            {"arxiv_id": f"2301.{n:05d}", "title": f"Paper {n:02d} on retrieval-augmented citation",
             "abstract": "rag citations" if n <= 12 else "agents benchmarks",
             "published": datetime(2023, 1, n, tzinfo=UTC), "source": "test"} for n in range(1, 25)],
            key=["arxiv_id"])
    return engine


def base_config(stub: OpenAIStub, concurrency: int) -> dict:
    return {"model": MODEL, "api_base": stub.url, "api_key_env": KEY_ENV, "search_K": 12, "K": 5,
            "concurrency": concurrency}


def report_row(engine, system_id: str, arxiv_id: str = QUERIES[0]) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT * FROM reports WHERE system_id = :s AND arxiv_id = :a"),
                           {"s": system_id, "a": arxiv_id}).mappings().first()
    return dict(row) if row else None


def logged_cost(engine, stub: OpenAIStub) -> float:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT sum(cost_usd) FROM llm_calls WHERE api_base = :b"),
                            {"b": stub.url}).scalar()


@pytest.mark.parametrize("concurrency", [1, 16])
def test_a_fanning_out_system_stores_every_call_token_and_cost_the_provider_served(release, concurrency):
    import litellm

    name = f"base_c{concurrency}"
    with OpenAIStub(model_suffix="") as stub:
        stub.default = base_brain
        add_system(release, name, "deepscholar_base", base_config(stub, concurrency))
        result = generate_pair(release, RELEASE, name, QUERIES[0])
        assert result["status"] == "ok", result
        served = stub.requests
        row = report_row(release, name)
        trace = row["trace"]
        assert sum(r["filter_batches"] for r in trace["rounds"]) >= 4  # the fan-out really happened
        assert row["n_llm_calls"] == served == trace["calls"]["total"] == result["llm_calls"]
        assert (row["prompt_tokens"], row["completion_tokens"]) == (12 * served, 5 * served)
        unit = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=12, completion_tokens=5))
        assert row["cost_usd"] == pytest.approx(unit * served) == pytest.approx(logged_cost(release, stub))
        usage = trace["llm_usage"]
        assert (usage["calls"], usage["cached_calls"], usage["requests"], usage["attempts"]) == (served, 0, served,
                                                                                                 served)

        # The same report written again is replayed from llm_calls: same numbers, no request, and the
        # trace says which calls were replayed.
        assert generate_pair(release, RELEASE, name, QUERIES[0])["status"] == "ok"
        assert stub.requests == served
        again = report_row(release, name)
        assert (again["n_llm_calls"], again["prompt_tokens"], again["cost_usd"]) == (
            row["n_llm_calls"], row["prompt_tokens"], row["cost_usd"])
        usage = again["trace"]["llm_usage"]
        assert (usage["calls"], usage["cached_calls"], usage["requests"], usage["attempts"]) == (served, served, 0, 0)
        assert usage["request_cost_usd"] is None
    stub.raise_errors()


def test_a_provider_answering_503_raises_and_keeps_the_previous_row(release):
    with OpenAIStub() as garbage:
        garbage.default = lambda body: "no JSON today"
        add_system(release, "base", "deepscholar_base", base_config(garbage, 4))
        assert generate_pair(release, RELEASE, "base", QUERIES[0])["status"] == "system_error"
    before = report_row(release, "base")
    assert "unparseable" in before["error"]
    counts = db.row_counts(release)

    with OpenAIStub() as down:
        down.default = lambda body: 503
        # Only the endpoint moved: the same system, moved in place (its next reports are a new build).
        assert add_system(release, "base", "deepscholar_base", base_config(down, 4)) == "moved"
        with pytest.raises(InfrastructureError, match=f"LLM provider {MODEL} at {down.url} unavailable"):
            generate_pair(release, RELEASE, "base", QUERIES[0])
        assert down.requests == 5  # the first call, 1 + 4 retries; then nothing else was tried
    assert report_row(release, "base") == before and db.row_counts(release) == counts


def test_a_missing_api_key_raises_before_any_request_and_stores_nothing(release, monkeypatch):
    with OpenAIStub() as stub:
        add_system(release, "base", "deepscholar_base", base_config(stub, 4))
        monkeypatch.delenv(KEY_ENV)
        with pytest.raises(MissingCredentials, match=f"^{KEY_ENV} is not set"):
            generate_pair(release, RELEASE, "base", QUERIES[0])
        assert stub.requests == 0
    assert report_row(release, "base") is None


def test_a_system_raising_its_own_error_is_a_system_error(release):
    add_system(release, "bad", "taxonomy_bad_output")
    result = generate_pair(release, RELEASE, "bad", QUERIES[0])
    assert result["status"] == "system_error"
    assert report_row(release, "bad")["error"] == "ValueError: sources and text disagree"


def test_generate_batch_fails_the_task_on_a_search_backend_outage(release, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_DB_CONNECT_RETRIES", "1")  # the refused connection is retried once, briefly
    monkeypatch.setenv("DEEPSCHOLAR_DB_CONNECT_BACKOFF_SECONDS", "0.1")
    add_system(release, "good", "taxonomy_cites_one")
    add_system(release, "dead", "taxonomy_dead_search")
    pairs = [{"release_id": RELEASE, "system_id": s, "arxiv_id": a}
             for s, a in [("good", QUERIES[0]), ("dead", QUERIES[0]), ("good", QUERIES[1])]]
    # The system wrapped the outage in its own SystemFailure: still not the system's fault.
    with pytest.raises(SystemFailure) as err:
        generate_batch(release, pairs)
    assert isinstance(err.value.__cause__, InfrastructureError)
    # Named by the connect-time retries (db.py), which gave up on the unreachable server.
    assert "the warehouse at 127.0.0.1:9/nowhere unavailable" in str(err.value.__cause__)
    assert "Connection refused" in str(err.value.__cause__)
    assert report_row(release, "good")["status"] == "ok"  # done before the outage: kept
    assert report_row(release, "dead") is None  # nothing stored for the pair that hit it
    assert report_row(release, "good", QUERIES[1]) is None  # the task stopped: Airflow retries it


def test_arxiv_search_down_is_an_infrastructure_error_and_a_bad_request_is_not(httpserver):
    import arxiv

    from deepscholar.search.arxiv import ArxivSearch
    from deepscholar.sources.arxiv import ArxivSource

    def search():
        source = ArxivSource(api_url=httpserver.url_for("/api/query"), delay_seconds=0, max_retries=1,
                             backoff_seconds=0.01)
        return ArxivSearch(CUTOFF, source=source)

    httpserver.expect_request("/api/query").respond_with_data("down", status=503)
    with pytest.raises(InfrastructureError, match=r"arXiv search at http://localhost:\d+/api/query unavailable"):
        search().search("dense retrieval", k=5)
    assert len(httpserver.log) == 2  # ArxivSource's own attempts first

    httpserver.clear()
    httpserver.expect_request("/api/query").respond_with_data(json.dumps({"error": "bad query"}), status=400)
    with pytest.raises(arxiv.HTTPError):
        search().search("dense retrieval", k=5)
