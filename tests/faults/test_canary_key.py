"""A canary API key must never be written anywhere (no table, no log line, no CLI output), nor sent to any
host but the one its base URL names.

OPENAI_API_KEY (the judge's key, read by litellm) and the variable an LLM system's config names
(`api_key_env`) hold unique canary strings. An LLM system (deepscholar_base) writes its reports and an LLM
judge scores them, against the local OpenAI-compatible stub, in-process with every logger at DEBUG, and
once more through the `deepscholar evaluate -v` command with litellm's and the OpenAI SDK's own debug logging
on; all of it once per transport (the direct OpenAI-compatible path and litellm). The stub must
have received the canaries (so they were really used); afterwards every row of every table, as text, and
every captured log line and output stream are searched for them.

Where a key goes (issue 46 §12): with DEEPSCHOLAR_WEB_API_BASES naming one local server, the page refuses
every `api_base` that only starts with it as a string (userinfo, a path off a segment boundary), and systems
stored with such a base (before the check, or by hand) or registered from the page under a base the operator
has since removed are refused when `deepscholar reports generate` runs them: a second local server, the host
after the `@`, must receive nothing, Anthropic's and Gemini's key headers included.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub, first_user_text
from support.warehouse import empty_warehouse

from deepscholar import db

RELEASE = "2025-06"
QUERIES = ["2506.00001"]
JUDGE_CANARY = f"sk-canary-judge-{uuid.uuid4().hex}"
SYSTEM_CANARY = f"sk-canary-system-{uuid.uuid4().hex}"
CANARIES = (JUDGE_CANARY, SYSTEM_CANARY)


def brain(body: dict) -> str:
    """A cooperative model for deepscholar_base's stages and the judges' prompts."""
    prompt = first_user_text(body)
    if "search queries for an academic search engine" in prompt:
        n = int(re.search(r"exactly (\d+) strings", prompt).group(1))
        return json.dumps(["retrieval augmented generation", "retrieval generation passages"][:n] + ["x"] * (n - 2))
    if "Search results (title and abstract of each)" in prompt or "Candidate papers" in prompt:
        listed = sorted({int(n) for n in re.findall(r"^\[(\d+)\]", prompt, re.MULTILINE)})
        k = re.search(r"Return the (\d+) most important", prompt)
        return json.dumps(listed[:int(k.group(1))] if k else listed)
    if "Sources you may cite" in prompt:
        return "## Related Work\n\nRetrieval-augmented generation grounds answers in retrieved passages [1]."
    if count := re.search(r"exactly (\d+) strings", prompt):
        return json.dumps(["support"] * int(count.group(1)))
    if prompt.startswith("You are comparing two related-work sections"):
        return json.dumps({"decision": "A", "explanation": "clearer"})
    if '"supported"' in prompt:
        return json.dumps({"supported": True, "explanation": "stated"})
    if '"grade"' in prompt:
        return json.dumps({"grade": 2, "explanation": "on topic"})
    raise AssertionError(f"unexpected prompt: {prompt[:200]}")


def seed(engine) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published",
                                      "window_start": datetime(2025, 6, 1, tzinfo=UTC),
                                      "window_end": datetime(2025, 7, 1, tzinfo=UTC)}], key=["release_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": q, "version": 1, "title": f"Retrieval augmented writing {q}",
            "abstract": "We study retrieval augmented generation for writing related work.",
            "published": datetime(2025, 6, 10, tzinfo=UTC), "section_raw_latex": "x",
            "section_text": "Retrieval augmented generation conditions a generator on passages [@lewis].",
            "word_count": 9} for q in QUERIES], key=["release_id", "arxiv_id"])
        db.upsert(conn, "nuggets", [{"release_id": RELEASE, "arxiv_id": q, "nugget_idx": i,
                                     "text": f"RAG fact {i}", "importance": "vital", "judge_config": "test"}
                                    for q in QUERIES for i in range(3)], key=["release_id", "arxiv_id", "nugget_idx"])
        db.upsert(conn, "corpus", [{"arxiv_id": f"2401.0000{i}", "title": f"Retrieval augmented generation {i}",
                                    "abstract": "Retrieval augmented generation grounds a generator in passages.",
                                    "published": datetime(2024, 1, i, tzinfo=UTC), "source": "reference"}
                                   for i in (1, 2, 3)], key=["arxiv_id"])


def rows_holding(engine, needle: str) -> dict[str, int]:
    """Every table of the schema, each row as text (all columns, jsonb included): rows containing needle."""
    found = {}
    with engine.connect() as conn:
        tables = conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'deepscholar'")).scalars()
        for table in tables:
            n = conn.execute(sa.text(f'SELECT count(*) FROM deepscholar."{table}" t WHERE strpos(t::text, :n) > 0'),
                             {"n": needle}).scalar_one()
            if n:
                found[table] = n
    return found


def _authorizations(stub: OpenAIStub) -> set[str]:
    return {request.headers.get("Authorization", "") for request, _ in stub.log}


LEAK_CASES = [pytest.param(where, id=f"canary-absent-from-{where}") for where in (
    "tables", "library-logs-at-debug", "cli-stdout-stderr")]


# What shows that a transport's debug output was really on: litellm's own lines, or, on the direct path
# (llm/openai_compatible.py), the connection trace of httpcore under its httpx client and httpx's request log.
DEBUG_MARKERS = {"litellm": ("Params passed to completion()", "LiteLLM"),
                 "direct": ("httpcore.http11 DEBUG send_request_headers", "HTTP Request: POST")}


@pytest.fixture(scope="module", params=["direct", "litellm"])
def canary_run(db_url, request):  # slow: builds and judges a month per transport
    """Generation and LLM judging with the canary keys, once per transport; what every channel captured."""
    transport = request.param
    from deepscholar.evaluation.pipeline import evaluate_release
    from deepscholar.systems.generation import generate_release
    from deepscholar.systems.registry import add_system

    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    seed(engine)
    log_stream = io.StringIO()
    handler = logging.StreamHandler(log_stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s %(args)s"))
    root = logging.getLogger()
    old_level = root.level
    with OpenAIStub() as stub, pytest.MonkeyPatch.context() as mp:
        stub.default = brain
        mp.setenv("OPENAI_API_KEY", JUDGE_CANARY)
        mp.setenv("DEEPSCHOLAR_LLM_TRANSPORT", transport)
        mp.setenv("DEEPSCHOLAR_CANARY_SYSTEM_KEY", SYSTEM_CANARY)
        mp.setenv("DEEPSCHOLAR_SYSTEM_KEY_VARIABLES", "DEEPSCHOLAR_CANARY_SYSTEM_KEY")  # the allow-list admits it
        mp.delenv("DEEPSCHOLAR_JUDGE_API_BASE", raising=False)
        add_system(engine, "llm_system", "deepscholar_base", {
            "model": "openai/stub-writer", "api_base": stub.url, "api_key_env": "DEEPSCHOLAR_CANARY_SYSTEM_KEY",
            "search_K": 3, "K": 2})
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)  # every logger, litellm's and the OpenAI SDK's included
        try:  # litellm's verbose mode prints rather than logs: its stdout and stderr are captured too
            with contextlib.redirect_stdout(log_stream), contextlib.redirect_stderr(log_stream):
                generated = generate_release(engine, RELEASE, ["llm_system"])
                judged = evaluate_release(engine, RELEASE, judge="openai/stub-judge", api_base=stub.url,
                                          metrics=["organization", "nugget_coverage", "citation_precision"])
        finally:
            root.removeHandler(handler)
            root.setLevel(old_level)
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPSCHOLAR_DB_URL=db_url, LITELLM_LOG="DEBUG",
                   OPENAI_LOG="debug", DEEPSCHOLAR_LLM_TRANSPORT=transport)
        cli = subprocess.run([sys.executable, "-m", "deepscholar.cli", "-v", "evaluate", "--release", RELEASE,
                              "--judge", "openai/stub-judge", "--api-base", stub.url, "--metrics", "claim_coverage",
                              "relevance_rate", "--json"], capture_output=True, text=True, env=env, timeout=300)
        stub.raise_errors()
        authorizations = _authorizations(stub)
    assert cli.returncode == 0, cli.stderr[-3000:]
    yield {"engine": engine, "generated": generated, "judged": judged, "library_log": log_stream.getvalue(),
           "cli": cli.stdout + cli.stderr, "cli_result": json.loads(cli.stdout[cli.stdout.index("{"):]),
           "authorizations": authorizations, "markers": DEBUG_MARKERS[transport]}


@pytest.mark.slow
@pytest.mark.parametrize("where", LEAK_CASES)
def test_canary_keys_are_never_stored_or_logged(canary_run, where):
    engine = canary_run["engine"]
    # The keys were really used: the stub saw both, and real work was done and stored.
    assert {f"Bearer {c}" for c in CANARIES} <= canary_run["authorizations"]
    assert canary_run["generated"].get("ok") == len(QUERIES), canary_run["generated"]
    assert canary_run["judged"]["llm_requests"] > 0 and canary_run["cli_result"]["llm_requests"] > 0
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM llm_calls")).scalar_one() > 0
    for canary in CANARIES:
        if where == "tables":
            assert rows_holding(engine, canary) == {}
        elif where == "library-logs-at-debug":
            assert canary_run["markers"][0] in canary_run["library_log"]  # the transport's debug output was on
            assert canary not in canary_run["library_log"]
        else:
            assert canary_run["markers"][1] in canary_run["cli"]  # its debug setting took effect
            assert canary not in canary_run["cli"]


# --- a key goes only to the host its base URL names (issue 46 §12) --------------------------------------------

class Recorder(BaseHTTPRequestHandler):
    """Any request: recorded (path, headers, body) and answered 500. One server class per instance."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        self.send_response(500)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST  # noqa: N815


@contextlib.contextmanager
def recording_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def two_hosts(monkeypatch):
    """`allowed` is the one server DEEPSCHOLAR_WEB_API_BASES names; `other` is the host a hostile base URL
    reaches past it. The canary key is an allowed key variable."""
    with recording_server() as allowed, recording_server() as other:
        monkeypatch.setenv("DEEPSCHOLAR_SYSTEM_KEY_VARIABLES", "DEEPSCHOLAR_CANARY_SYSTEM_KEY")
        monkeypatch.setenv("DEEPSCHOLAR_CANARY_SYSTEM_KEY", SYSTEM_CANARY)
        yield allowed.server_port, other.server_port, allowed, other


ANTHROPIC, GEMINI = "anthropic/claude-3-5-sonnet-20240620", "gemini/gemini-1.5-flash"
# (DEEPSCHOLAR_WEB_API_BASES, the api_base posted, the model whose key headers would carry the key);
# {a}: the allowed server's port, {b}: the other one's.
PAGE_BASE_CASES = [
    pytest.param("http://127.0.0.1:{a}", "http://127.0.0.1:{a}@127.0.0.1:{b}", ANTHROPIC,
                 id="api-base-userinfo-to-another-host"),
    pytest.param("http://127.0.0.1:{a}", "http://127.0.0.1:{a}:x@127.0.0.1:{b}/v1", GEMINI,
                 id="api-base-user-password-to-another-host"),
    pytest.param("http://127.0.0.1:{a}", "http://127.0.0.1:{a}\\@127.0.0.1:{b}", ANTHROPIC,
                 id="api-base-backslash-userinfo"),
    pytest.param("http://127.0.0.1:{a}", "http://127.0.0.1:{a}#@127.0.0.1:{b}", GEMINI, id="api-base-fragment"),
    pytest.param("http://127.0.0.1:{a}/v1", "http://127.0.0.1:{a}/v1evil", GEMINI,
                 id="api-base-path-off-a-segment-boundary"),
    pytest.param("http://127.0.0.1:{a}/v1", "http://127.0.0.1:{a}/v1/../admin", ANTHROPIC, id="api-base-dot-segments"),
]


@pytest.mark.parametrize(("allowed_base", "base", "model"), PAGE_BASE_CASES)
def test_the_page_compares_api_bases_parsed_not_as_string_prefixes(engine, two_hosts, allowed_base, base, model):
    from pytest_httpserver import HTTPServer
    from support.chromium import parse_html, serve

    from deepscholar.web import create_app
    from faults.conftest import unchanged
    from faults.test_hostile_registration import GOOD, OPERATOR, post, stand_in_airflow

    a, b, _, other = two_hosts
    config = {"model": model, "api_base": base.format(a=a, b=b), "api_key_env": "DEEPSCHOLAR_CANARY_SYSTEM_KEY"}
    with HTTPServer(threaded=True) as airflow, pytest.MonkeyPatch.context() as mp:
        stand_in_airflow(airflow)
        mp.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", airflow.url_for("/").rstrip("/"))
        mp.setenv("DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE", "1000")
        mp.setenv("DEEPSCHOLAR_WEB_API_BASES", allowed_base.format(a=a))
        with serve(create_app(lambda: engine)) as site:
            with unchanged(engine):
                resp = post(site, {**GOOD, **OPERATOR, "kind": "deepscholar_base", "config": json.dumps(config)})
            fine = {**config, "api_base": allowed_base.format(a=a) + "/chat/"}  # below the allowed base: passes
            ok = post(site, {**GOOD, **OPERATOR, "name": "fine", "kind": "deepscholar_base", "config": json.dumps(fine)})
    assert resp.status_code == 400, resp.text[:300]
    assert "DEEPSCHOLAR_WEB_API_BASES" in parse_html(resp.text).find_all("p", {"class": "error"})[-1].text()
    assert ok.status_code == 200, ok.text[:300]
    with engine.connect() as conn:  # remembered as the page's: held to the list whenever it runs
        assert conn.execute(sa.text("SELECT registered_from FROM systems WHERE system_id = 'fine'")).scalar_one() == "page"
    assert other.seen == []


def _store_system(engine, name: str, model: str, api_base: str, registered_from: str) -> None:
    """A system row as one stored before the parsed check (or written by hand) would be."""
    with engine.begin() as conn:
        db.upsert(conn, "systems", [{"system_id": name, "kind": "deepscholar_base", "registered_from": registered_from,
                                     "config": {"model": model, "api_base": api_base, "search_K": 3, "K": 2,
                                                "api_key_env": "DEEPSCHOLAR_CANARY_SYSTEM_KEY"}}], key=["system_id"])


RUN_CASES = [pytest.param("reports-generate-sends-no-key-past-the-allowed-base", id="stored-bases-refused-when-run")]


@pytest.mark.parametrize("case", RUN_CASES)
def test_stored_api_bases_are_checked_again_where_the_request_is_sent(engine, db_url, two_hosts, case):
    """Page rows with a string-prefix base, an operator's row written by hand with userinfo, and a page row
    whose base the operator has since removed from the list: `reports generate` sends nothing for any."""
    a, b, allowed, other = two_hosts
    seed(engine)
    trick = f"http://127.0.0.1:{a}@127.0.0.1:{b}"  # accepted under http://127.0.0.1:{a} while prefixes were strings
    _store_system(engine, "page_userinfo_anthropic", ANTHROPIC, trick, "page")
    _store_system(engine, "page_userinfo_gemini", GEMINI, f"http://127.0.0.1:{a}:x@127.0.0.1:{b}/v1", "page")
    _store_system(engine, "hand_userinfo", ANTHROPIC, trick, "operator")
    # Registered while the list named the other server too; the operator has removed it since.
    _store_system(engine, "page_since_removed", GEMINI, f"http://127.0.0.1:{b}/v1", "page")
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPSCHOLAR_DB_URL=db_url, DEEPSCHOLAR_LLM_RETRIES="0",
               DEEPSCHOLAR_WEB_API_BASES=f"http://127.0.0.1:{a}")
    run = subprocess.run([sys.executable, "-m", "deepscholar.cli", "reports", "generate", "--release", RELEASE],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert other.seen == [] and allowed.seen == [], (other.seen[:1], allowed.seen[:1])
    with engine.connect() as conn:
        errors = dict(conn.execute(sa.text("SELECT system_id, error FROM reports WHERE status = 'system_error'")).all())
        assert conn.execute(sa.text("SELECT count(*) FROM reports WHERE status = 'ok'")).scalar_one() == 0
    assert set(errors) == {"page_userinfo_anthropic", "page_userinfo_gemini", "hand_userinfo", "page_since_removed"}
    for name in ("page_userinfo_anthropic", "page_userinfo_gemini", "page_since_removed"):
        assert "DEEPSCHOLAR_WEB_API_BASES" in errors[name], errors[name]
    assert "userinfo" in errors["hand_userinfo"] and "nothing was sent" in errors["hand_userinfo"]
    assert SYSTEM_CANARY not in run.stdout + run.stderr + json.dumps(errors)
