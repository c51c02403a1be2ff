"""Registration from the page under attack (issue 32 §1, §5, §6), and `deepscholar systems add` given the same.

The page is served by uvicorn on a real socket; Airflow's API is a local HTTP server answering as Airflow's
API server does: `/auth/token` signs in `operator` (may create runs of the benchmark DAG: its backfill dry run
answers 200) and `viewer` (a valid password, but the dry run answers 403). Every hostile post must leave the
warehouse unchanged (faults/conftest.py `unchanged`), answer a 4xx with one line and the security headers,
and never pass a secret of the workers' environment to a registered system.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode, urlsplit

import pytest
import requests
import sqlalchemy as sa
from pytest_httpserver import HTTPServer
from support.chromium import parse_html, serve
from werkzeug import Response

from deepscholar import cli
from deepscholar.errors import InvalidInput
from deepscholar.systems.registry import add_system
from deepscholar.web import create_app
from deepscholar.web.registration import SignInThrottle, Throttled
from faults.conftest import unchanged

OPERATOR = {"username": "operator", "password": "s3cret"}
VIEWER = {"username": "viewer", "password": "look"}
GOOD = {"name": "newcomer", "kind": "extractive", "config": '{"top_k": 6}', "version": "1", "knowledge_cutoff": ""}
SECURITY_HEADERS = ("Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy")


def stand_in_airflow(server: HTTPServer, token_delay: float = 0.0) -> None:
    tokens = {("operator", "s3cret"): "op-tok", ("viewer", "look"): "view-tok"}

    def token(request):
        time.sleep(token_delay)
        body = json.loads(request.get_data() or b"{}")
        tok = tokens.get((body.get("username"), body.get("password")))
        if tok is None:
            return Response("bad credentials", status=401)
        return Response(json.dumps({"access_token": tok}), content_type="application/json")

    def dry_run(request):
        if request.headers.get("Authorization") != "Bearer op-tok":
            return Response(json.dumps({"detail": "Forbidden"}), status=403, content_type="application/json")
        return Response(json.dumps({"backfills": [], "total_entries": 0}), content_type="application/json")

    server.expect_request("/auth/token", method="POST").respond_with_handler(token)
    server.expect_request("/api/v2/backfills/dry_run", method="POST").respond_with_handler(dry_run)


@pytest.fixture
def airflow(monkeypatch):
    with HTTPServer(threaded=True) as server:
        stand_in_airflow(server)
        monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", server.url_for("/").rstrip("/"))
        monkeypatch.setenv("DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE", "1000")
        monkeypatch.delenv("DEEPSCHOLAR_FROZEN_SLICE", raising=False)
        yield server


@pytest.fixture
def site(engine, airflow):
    with serve(create_app(lambda: engine)) as url:
        yield url


def post(url: str, data: dict, **kw) -> requests.Response:
    return requests.post(f"{url}/systems/new", data=data, timeout=30, **kw)


def signins(server: HTTPServer) -> int:
    return sum(r.path == "/auth/token" for r, _ in server.log)


def error_line(resp: requests.Response) -> str:
    """The page's one error line (the form's, or the error page's)."""
    dom = parse_html(resp.text)
    found = dom.find_all("p", {"class": "error"})
    assert found, resp.text[:500]
    line = found[-1].text()
    assert "\n" not in line.strip() and "Traceback" not in resp.text
    return line


def assert_headers(resp) -> None:
    for h in SECURITY_HEADERS:
        assert resp.headers.get(h), (h, resp.status_code, dict(resp.headers))


def systems(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        return {r.system_id: dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM systems"))}


# --- who may register ----------------------------------------------------------------------------------------

def test_a_password_is_not_enough_airflow_must_let_the_user_create_benchmark_runs(site, airflow, engine):
    with unchanged(engine):
        refused = post(site, {**GOOD, **VIEWER})
    assert refused.status_code == 403 and "may not create runs of deepscholar_benchmark" in error_line(refused)
    assert_headers(refused)
    asked = [r for r, _ in airflow.log if r.path == "/api/v2/backfills/dry_run"]
    assert asked and json.loads(asked[-1].get_data())["dag_id"] == "deepscholar_benchmark"
    queue = requests.post(f"{site}/systems/newcomer/backfill", data=VIEWER, timeout=30)
    assert queue.status_code == 403  # queueing asks the same

    ok = post(site, {**GOOD, **OPERATOR})
    assert ok.status_code == 200, ok.text
    assert systems(engine)["newcomer"]["config"] == {"top_k": 6}


def test_the_page_only_creates_a_registered_system_stays_as_the_operator_left_it(site, engine, monkeypatch,
                                                                                 capsys, db_url):
    """The issue's reproduction: re-registering a system with an api_base and a key variable of one's own.
    Moving it is the operator's, on the command line, and makes its next reports a new build."""
    add_system(engine, "external_http_demo", "external", {"endpoint": "http://systems.example/report"})
    monkeypatch.setenv("DEEPSCHOLAR_WEB_API_BASES", "http://127.0.0.1")
    hijack = {**OPERATOR, "name": "external_http_demo", "kind": "external", "version": "1",
              "config": json.dumps({"endpoint": "http://systems.example/report", "timeout": 5}),
              "knowledge_cutoff": ""}
    with unchanged(engine):
        resp = post(site, hijack)
    assert resp.status_code == 409 and "already registered" in error_line(resp)
    assert systems(engine)["external_http_demo"]["config"] == {"endpoint": "http://systems.example/report"}

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    code = cli.main(["systems", "add", "external_http_demo", "--kind", "external",
                     "--config", json.dumps({"endpoint": "http://systems.example/v2/report"})])
    out = capsys.readouterr().out
    assert code == 0 and "moved to a new endpoint" in out and "+endpoint1+" in out, out
    assert systems(engine)["external_http_demo"]["endpoint_revision"] == 1


KEY_VARIABLE_CASES = [
    pytest.param("DEEPSCHOLAR_DB_URL", id="key-variable-warehouse-url"),
    pytest.param("PROBE_CANARY", id="key-variable-any-name"),
    pytest.param("AIRFLOW__CORE__FERNET_KEY", id="key-variable-airflow-secret"),
]


@pytest.mark.parametrize("variable", KEY_VARIABLE_CASES)
def test_api_key_env_must_name_an_allowed_variable_page_cli_and_at_run_time(site, engine, variable, monkeypatch,
                                                                             capsys, db_url):
    config = {"model": "openai/gpt-4o", "api_key_env": variable}
    form = {**OPERATOR, **GOOD, "kind": "deepscholar_base", "config": json.dumps(config)}
    with unchanged(engine):
        resp = post(site, form)
        monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
        code = cli.main(["systems", "add", "keyed", "--kind", "deepscholar_base", "--config", json.dumps(config)])
    assert resp.status_code == 400 and "DEEPSCHOLAR_SYSTEM_KEY_VARIABLES" in error_line(resp)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not an allowed key variable" in err
    # A row stored before the allow-list (or by hand) is refused when the system runs: no key is read.
    from deepscholar.systems.base import SystemContext
    from deepscholar.systems.deepscholar_base import build_llm_client

    monkeypatch.setenv(variable, "postgresql://canary:secret@nowhere/db")  # a value every variable takes
    sent = []
    with pytest.raises(InvalidInput, match="not an allowed key variable"):
        build_llm_client(config, SystemContext(engine=engine, llm=lambda *a, **kw: sent.append(kw)))
    assert sent == []
    # An allowed one passes, from the page too.
    ok = post(site, {**form, "config": json.dumps({**config, "api_key_env": "OPENAI_API_KEY"})})
    assert ok.status_code == 200, ok.text


def test_api_base_from_the_page_only_under_an_allowed_prefix(site, engine, monkeypatch):
    config = {"model": "openai/gpt-4o", "api_base": "http://attacker.example/v1"}
    form = {**OPERATOR, **GOOD, "kind": "deepscholar_base", "config": json.dumps(config)}
    with unchanged(engine):
        resp = post(site, form)
    assert resp.status_code == 400 and "DEEPSCHOLAR_WEB_API_BASES" in error_line(resp)
    monkeypatch.setenv("DEEPSCHOLAR_WEB_API_BASES", "http://models.internal/")
    ok = post(site, {**form, "config": json.dumps({**config, "api_base": "http://models.internal/v1"})})
    assert ok.status_code == 200, ok.text


# --- bounded, validated input --------------------------------------------------------------------------------

HOSTILE_FORM_CASES = [
    pytest.param({"config": '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"}, "too long", id="config-nested-10000-deep"),
    pytest.param({"config": '{"a": ' + "[" * 5_000 + "]" * 5_000 + "}"}, "nested too deep", id="config-nested-5000-deep"),
    pytest.param({"config": '{"a": {"b": [[[[[[[[1]]]]]]]]}}'}, "nested too deep", id="config-nested-10-deep"),
    pytest.param({"config": '{"top_k": NaN}'}, "NaN", id="config-nan"),
    pytest.param({"config": '{"top_k": Infinity}'}, "Infinity", id="config-infinity"),
    pytest.param({"config": '{"search": "a\\u0000b"}'}, "NUL", id="config-nul"),
    pytest.param({"config": '{"top_k": "lots"}'}, "must be a positive integer", id="config-wrong-type"),
    pytest.param({"config": '{"top_k": 6, "shell": "rm -rf /"}'}, "takes no config key", id="config-unknown-key"),
    pytest.param({"config": json.dumps({"x": "y" * 20_000})}, "too long", id="config-too-long"),
    pytest.param({"version": "1; DROP TABLE systems"}, "invalid version", id="version-injection"),
    pytest.param({"version": "v" * 200}, "invalid version", id="version-too-long"),
    pytest.param({"knowledge_cutoff": "9999-12-31"}, "out of range", id="cutoff-far-future"),
    pytest.param({"knowledge_cutoff": "1900-01-01"}, "out of range", id="cutoff-before-arxiv"),
    pytest.param({"knowledge_cutoff": "2025-02-30"}, "invalid knowledge cutoff", id="cutoff-not-a-date"),
    pytest.param({"name": "n\u0435wcomer"}, "invalid system name", id="name-mixed-script"),
    pytest.param({"name": "new comer<script>"}, "invalid system name", id="name-markup"),
    pytest.param({"kind": "no_such_kind"}, "no_such_kind", id="kind-unknown"),
]


@pytest.mark.parametrize(("change", "said"), HOSTILE_FORM_CASES)
def test_hostile_registration_gets_400_with_one_line_and_writes_nothing(site, engine, change, said, capsys,
                                                                        monkeypatch, db_url):
    form = {**OPERATOR, **GOOD, **change}
    with unchanged(engine):
        resp = post(site, form)
        # The CLI applies the same checks: exit 2, one line, no traceback.
        monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
        code = cli.main(["systems", "add", form["name"], "--kind", form["kind"], "--config", form["config"],
                         "--version", form["version"], "--knowledge-cutoff", form["knowledge_cutoff"] or "unknown"])
    assert resp.status_code in (400, 404), (resp.status_code, resp.text[:300])
    assert said in error_line(resp)
    assert_headers(resp)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err[:500]


def test_a_full_width_name_is_stored_as_the_ascii_it_looks_like(site, engine):
    resp = post(site, {**OPERATOR, **GOOD, "name": "ｎｅｗｃｏｍｅｒ２"})
    assert resp.status_code == 200, resp.text
    assert "newcomer2" in systems(engine)


def _raw_post(url: str, headers: dict, body: bytes | None = None, chunks: list[bytes] | None = None,
              pause: float = 0.0) -> tuple[int, str, float]:
    parts = urlsplit(url)
    started = time.monotonic()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("POST", "/systems/new")
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        try:
            if body is not None:
                conn.send(body)
            for chunk in chunks or []:
                time.sleep(pause)
                conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except OSError:
            pass  # the page answered and closed before the rest was sent
        resp = conn.getresponse()
        return resp.status, resp.read().decode(), time.monotonic() - started
    finally:
        conn.close()


BODY_CASES = [
    pytest.param("declared-200MB", id="body-declared-200-MB"),
    pytest.param("chunked-over-limit", id="body-chunked-over-the-limit"),
    pytest.param("trickled", id="body-trickled-past-the-deadline"),
]


@pytest.mark.parametrize("how", BODY_CASES)
def test_request_bodies_are_bounded_in_size_and_time_before_sign_in(site, airflow, engine, how, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_WEB_BODY_SECONDS", "1")
    form_headers = {"Content-Type": "application/x-www-form-urlencoded"}
    with unchanged(engine):
        if how == "declared-200MB":
            status, body, took = _raw_post(site, {**form_headers, "Content-Length": str(200 * 1024 * 1024)},
                                           body=b"username=operator&")
        elif how == "chunked-over-limit":
            status, body, took = _raw_post(site, {**form_headers, "Transfer-Encoding": "chunked"},
                                           chunks=[b"x" * 32_768] * 4)
        else:
            status, body, took = _raw_post(site, {**form_headers, "Transfer-Encoding": "chunked"},
                                           chunks=[b"a=1&"] * 6, pause=0.5)
    assert status == (408 if how == "trickled" else 413), body[:300]
    assert "DEEPSCHOLAR_WEB_" in parse_html(body).one("p", {"class": "error"}).text()
    assert took < 10
    assert signins(airflow) == 0  # nothing reached Airflow


# --- sign-in: throttled, never on the readers' threads, only from this page -----------------------------------

def _post_from(url: str, source: str, data: dict) -> int:
    """A post from another loopback address (the client address the throttle sees)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30, source_address=(source, 0))
    try:
        conn.request("POST", "/systems/new", body=urlencode(data),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_password_guessing_is_throttled_per_client_and_per_user_name(site, airflow, engine, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE", "3")
    guesses = [{**GOOD, "username": f"user{i}", "password": "guess"} for i in range(5)]
    with unchanged(engine):
        statuses = [post(site, g).status_code for g in guesses]
        assert statuses == [403, 403, 403, 429, 429]
        assert signins(airflow) == 3  # refused attempts never reach Airflow
        throttled = post(site, guesses[0])
        assert throttled.headers.get("Retry-After") and "DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE" in error_line(throttled)
        # One user name from many addresses: once the name is at its limit, an address that already tried it
        # waits (below its own limit), while an address that has not gets its attempt.
        try:
            by_name = [_post_from(site, f"127.0.0.{i}", {**GOOD, "username": "victim", "password": "x"})
                       for i in (2, 3, 4, 2, 5)]
        except OSError as exc:  # pragma: no cover - loopback aliases missing
            pytest.skip(f"no 127.0.0.x source addresses here: {exc}")
    assert by_name == [403, 403, 403, 429, 403]


LOCKOUT_CASES = [pytest.param(10, id="ten-wrong-passwords-do-not-lock-the-named-user-out")]


@pytest.mark.parametrize("guesses", LOCKOUT_CASES)
def test_a_strangers_wrong_passwords_do_not_lock_a_user_out(site, airflow, engine, monkeypatch, guesses):
    """Issue 46 §14: ten wrong passwords a minute for `operator` from one address locked the operator out of
    the form everywhere. The guesser's address waits; the operator, from their own, signs in."""
    monkeypatch.setenv("DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE", str(guesses))
    wrong = {**GOOD, "username": OPERATOR["username"], "password": "guess"}
    try:
        with unchanged(engine):
            tried = [_post_from(site, "127.0.0.2", wrong) for _ in range(guesses + 1)]
        own = _post_from(site, "127.0.0.3", {**GOOD, **OPERATOR})
    except OSError as exc:  # pragma: no cover - loopback aliases missing
        pytest.skip(f"no 127.0.0.x source addresses here: {exc}")
    assert tried == [403] * guesses + [429]
    assert own == 200
    assert "newcomer" in systems(engine)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def web_command(db_url: str, airflow_url: str, *options: str):
    """`deepscholar web` as an operator starts it (the real command, in its own process); its base URL."""
    port = _free_port()
    env = dict(os.environ, DEEPSCHOLAR_DB_URL=db_url, DEEPSCHOLAR_AIRFLOW_API_URL=airflow_url,
               DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE="3")
    proc = subprocess.Popen([sys.executable, "-m", "deepscholar.cli", "web", "--port", str(port), *options],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{url}/systems/new", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


FORWARDED_CASES = [
    pytest.param((), [403, 403, 403, 429, 429], id="x-forwarded-for-from-loopback-not-believed"),
    pytest.param(("--trusted-proxy", "127.0.0.1"), [403] * 5, id="x-forwarded-for-from-a-configured-proxy-believed"),
]


@pytest.mark.parametrize(("options", "statuses"), FORWARDED_CASES)
def test_deepscholar_web_believes_forwarded_addresses_only_from_configured_proxies(engine, db_url, airflow, options,
                                                                                  statuses):
    """Issue 46 §14: uvicorn believes X-Forwarded-For from 127.0.0.1 by default, so a client on the page's
    host (or behind a proxy passing the header on) chose the address the sign-in limit counted."""
    guesses = [{**GOOD, "username": f"user{i}", "password": "guess"} for i in range(5)]
    with web_command(db_url, airflow.url_for("/").rstrip("/"), *options) as url, unchanged(engine):
        got = [requests.post(f"{url}/systems/new", data=g, headers={"X-Forwarded-For": f"203.0.113.{i}"},
                             timeout=30).status_code for i, g in enumerate(guesses)]
    assert got == statuses


CASE_NAME_CASES = [pytest.param("EXTRACTIVE", id="name-upper-case-twin"),
                   pytest.param("Extractive", id="name-capitalised-twin")]


@pytest.mark.parametrize("twin", CASE_NAME_CASES)
def test_a_name_differing_only_by_case_is_the_same_system(site, engine, twin, capsys, monkeypatch, db_url, tmp_path):
    """Issue 46 §14: `EXTRACTIVE` beside `extractive` was a second system on the board. The page (409), `systems
    add` and `reports import` (exit 2, one line) refuse it, and the warehouse itself does too."""
    add_system(engine, "extractive", "extractive", {"top_k": 6})
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    outputs = tmp_path / "out.jsonl"
    outputs.write_text(json.dumps({"arxiv_id": "2506.00001", "text": "A report [1].",
                                   "sources": [{"idx": 1, "arxiv_id": "2401.00001", "title": "T"}]}) + "\n")
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO releases (release_id, status) VALUES ('2025-06', 'published')"))
    with unchanged(engine):
        page = post(site, {**GOOD, **OPERATOR, "name": twin, "kind": "extractive", "config": '{"top_k": 6}'})
        added = cli.main(["systems", "add", twin, "--kind", "extractive", "--config", '{"top_k": 6}'])
        added_err = capsys.readouterr().err
        imported = cli.main(["reports", "import", twin, str(outputs), "--release", "2025-06"])
        imported_err = capsys.readouterr().err
        with pytest.raises(sa.exc.IntegrityError, match="systems_name_any_case"), engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO systems (system_id, kind) VALUES (:s, 'extractive')"), {"s": twin})
    assert page.status_code == 409 and "only by case" in error_line(page)
    for code, err in ((added, added_err), (imported, imported_err)):
        assert code == 2 and err.count("\n") == 1 and "only by case" in err, err


def test_the_throttle_counts_look_alike_names_as_one_and_forgets_after_a_minute():
    now = [0.0]
    throttle = SignInThrottle(clock=lambda: now[0])
    for client in ("a", "b"):
        throttle.take(client, "Operator", 2) if client == "a" else throttle.take(client, "ＯＰＥＲＡＴＯＲ", 2)
    with pytest.raises(Throttled, match="user name"):
        throttle.take("a", " operator ", 2)  # one name, tried from this address already
    throttle.take("c", "operator", 2)  # an address that has not tried it gets its attempt
    now[0] = 61.0
    throttle.take("a", "operator", 2)


def test_a_post_from_another_sites_page_is_refused_before_sign_in(site, airflow, engine):
    with unchanged(engine):
        foreign = post(site, {**GOOD, **OPERATOR}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and "another site" in error_line(foreign)
        cross = post(site, {**GOOD, **OPERATOR}, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
    assert signins(airflow) == 0
    own = post(site, {**GOOD, **OPERATOR}, headers={"Origin": site})
    assert own.status_code == 200, own.text


def test_a_slow_airflow_sign_in_never_slows_the_readers(engine, monkeypatch):
    with HTTPServer(threaded=True) as slow:
        stand_in_airflow(slow, token_delay=3.0)
        monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", slow.url_for("/").rstrip("/"))
        monkeypatch.setenv("DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE", "1000")
        with serve(create_app(lambda: engine)) as url, ThreadPoolExecutor(40) as pool:
            base = time.monotonic()
            requests.get(f"{url}/api/history", timeout=30)
            quiet = time.monotonic() - base
            posts = [pool.submit(post, url, {**GOOD, **OPERATOR, "name": f"n{i}"}) for i in range(40)]
            time.sleep(0.5)  # the posts are in, the sign-ins are waiting on Airflow
            reads = []
            for _ in range(5):
                started = time.monotonic()
                assert requests.get(f"{url}/api/history", timeout=30).status_code == 200
                reads.append(time.monotonic() - started)
            statuses = sorted(f.result().status_code for f in posts)
    assert max(reads) < max(1.0, 10 * quiet), (reads, quiet)
    assert statuses.count(503) >= 30 and set(statuses) <= {200, 503}, statuses  # 2 threads + 2 waiting


# --- clear errors ----------------------------------------------------------------------------------------------

def test_the_backfill_confirm_step_answers_wrong_passwords_and_unknown_systems_with_a_page(site, engine):
    with unchanged(engine):
        wrong = requests.post(f"{site}/systems/ghost/backfill", data={"username": "operator", "password": "x"},
                              timeout=30)
        unknown = requests.post(f"{site}/systems/ghost/backfill", data=OPERATOR, timeout=30)
    assert wrong.status_code == 403 and "refused to sign in" in error_line(wrong)
    assert unknown.status_code == 404 and "ghost" in error_line(unknown)
    assert_headers(wrong)
    assert_headers(unknown)


WINDOW_CASES = [
    pytest.param("/?from=garbage", 400, id="window-malformed-from"),
    pytest.param("/?to=2025-13", 400, id="window-malformed-to"),
    pytest.param("/?from=2025-06&to=2025-01", 400, id="window-reversed"),
    pytest.param("/report/not-a-number", 400, id="report-id-not-a-number"),
]


@pytest.mark.parametrize(("path", "status"), WINDOW_CASES)
def test_malformed_parameters_get_a_4xx_page_with_one_line_and_the_headers(site, engine, path, status):
    with unchanged(engine):
        resp = requests.get(site + path, timeout=30)
    assert resp.status_code == status, resp.text[:300]
    error_line(resp)
    assert_headers(resp)


HEAD_CASES = [pytest.param(p, id=f"head-{p.strip('/').replace('/', '-') or 'board'}")
              for p in ("/systems/new", "/api/history", "/history")]


@pytest.mark.parametrize("path", HEAD_CASES)
def test_head_works_where_get_does(site, path):
    got = requests.get(site + path, timeout=30)
    head = requests.head(site + path, timeout=30)
    assert head.status_code == got.status_code == 200
    assert head.content == b"" and head.headers.get("Content-Type") == got.headers.get("Content-Type")
    assert_headers(head)
