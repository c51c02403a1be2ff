"""The command line other parts of the team script against, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import shared_data

pytestmark = pytest.mark.slow  # CLI subprocesses on a built month

CLI = [sys.executable, "-m", "deepscholar.cli"]
LATEX_REAL = shared_data.folder_names("latex_real")


def run_cli(*args: str, db_url: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    if db_url:
        env["DEEPSCHOLAR_DB_URL"] = db_url
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("name", LATEX_REAL)
def test_latex_inspect_json_agrees_with_labels(name):
    project = shared_data.require("latex_real", name)
    labels = json.loads((project / "labels.json").read_text())
    out = run_cli("latex", "inspect", str(project), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result) >= {"section_title", "section_text", "cite_keys", "bib_entries"}
    if not labels["has_related_work"]:
        assert result["section_title"] is None and result["cite_keys"] == []
        return
    assert result["section_title"] == labels["section_title"]
    assert result["cite_keys"] == sorted(set(labels["cite_keys"]))
    # Every cite key resolves to a bibliography entry with a non-empty title.
    assert sorted(result["bib_entries"]) == result["cite_keys"]
    assert all(title.strip() for title in result["bib_entries"].values())


def test_db_init_is_idempotent_from_the_command_line(db_url):
    first = run_cli("db", "init", db_url=db_url)
    second = run_cli("db", "init", db_url=db_url)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "nothing new" in second.stdout


def test_import_official_then_releases_json(engine, db_url, shared_fixtures):
    out = run_cli("import-official", str(shared_fixtures / "deepscholar_official"), "--release", "official-2025q2",
                  db_url=db_url)
    assert out.returncode == 0, out.stderr
    listed = run_cli("releases", "--json", db_url=db_url)
    assert listed.returncode == 0, listed.stderr
    (release,) = json.loads(listed.stdout)
    assert release["release_id"] == "official-2025q2"
    assert release["status"] == "published"
    assert release["queries"] == 5
    nugget_files = list((shared_fixtures / "deepscholar_official" / "nuggets").glob("*.json"))
    assert release["nuggets"] == sum(len(json.loads(p.read_text())["nuggets"]) for p in nugget_files)
    assert release["references"] > 0 and release["resolved"] > 0
    assert (release["version"], release["current"], len(release["manifest"])) == (1, True, 12)
    # Sealed on import: the same files again change nothing, and the summary shows the version and hash.
    again = run_cli("import-official", str(shared_fixtures / "deepscholar_official"), "--release", "official-2025q2",
                    db_url=db_url)
    assert again.returncode == 0 and json.loads(again.stdout)["unchanged"] is True, again.stdout
    summary = run_cli("release", "summary", "official-2025q2", db_url=db_url)
    assert "version 1 of official-2025q2 (current)" in summary.stdout
    assert f"manifest hash                  {release['manifest']}" in summary.stdout


def test_unknown_release_is_a_clear_error(engine, db_url):
    out = run_cli("release", "summary", "1999-01", db_url=db_url)
    assert out.returncode == 2
    assert "no release 1999-01" in out.stderr


def test_systems_import_reports_generate_and_reports(engine, db_url, shared_fixtures, tmp_path):
    assert run_cli("import-official", str(shared_fixtures / "deepscholar_official"), "--release", "official",
                   db_url=db_url).returncode == 0
    with engine.begin() as conn:  # generation only runs on published releases; the import publishes
        assert conn.exec_driver_sql("SELECT status FROM releases").scalar() == "published"

    added = run_cli("systems", "add", "oracle", "--kind", "oracle", db_url=db_url)
    assert added.returncode == 0, added.stderr
    bad = run_cli("systems", "add", "x", "--kind", "no_such_kind", db_url=db_url)
    assert bad.returncode == 2 and "unknown system kind" in bad.stderr

    outputs = shared_fixtures / "deepscholar_official" / "system_outputs_paper0" / "search_ai_gpt_4.1"
    keyed = tmp_path / "2506.02838v1"
    import shutil

    shutil.copytree(outputs, keyed)
    # An output whose query cannot be known is reported, stored nowhere, and fails the command.
    unkeyed = run_cli("import-reports", "search_ai", str(keyed), "--release", "official", db_url=db_url)
    assert unkeyed.returncode == 2 and "names no arXiv id" in unkeyed.stderr
    imported = run_cli("import-reports", "search_ai", str(tmp_path), "--release", "official", "--json",
                       db_url=db_url)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert json.loads(imported.stdout)["n_stored"] == 1

    generated = run_cli("generate", "--release", "official", "--system", "oracle", db_url=db_url)
    assert generated.returncode == 0, generated.stderr
    assert json.loads(generated.stdout)["pairs"] == 5

    listed = json.loads(run_cli("systems", "list", "--json", db_url=db_url).stdout)
    assert {s["system_id"]: s["kind"] for s in listed} == {"oracle": "oracle", "search_ai": "external"}

    reports = run_cli("reports", "--release", "official", "--json", db_url=db_url)
    assert reports.returncode == 0, reports.stderr
    rows = json.loads(reports.stdout)
    by_system = {}
    for r in rows:
        by_system.setdefault(r["system_id"], []).append(r)
    assert len(by_system["oracle"]) == 5
    (search_ai,) = by_system["search_ai"]
    assert search_ai["arxiv_id"] == "2506.02838" and search_ai["status"] == "ok"
    assert search_ai["n_sources"] > 0 and search_ai["n_unresolved_citations"] == 0
    assert set(search_ai) >= {"system_id", "arxiv_id", "status", "n_sources", "n_citations",
                              "n_unresolved_citations", "leaked_sources"}

    assert run_cli("systems", "deactivate", "oracle", db_url=db_url).returncode == 0
    assert json.loads(run_cli("systems", "list", "--json", db_url=db_url).stdout)[0]["active"] is False
