"""Read-side summaries printed by the CLI and the demo."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from tabulate import tabulate

from deepscholar.errors import NotFound
from deepscholar.release.candidates import release_counts


def list_releases(engine: Engine) -> list[dict]:
    with engine.connect() as conn:
        # Versions of a month side by side (release_versions: the changelog's one line, the current one).
        rows = conn.execute(sa.text(
            "SELECT r.release_id, r.source, r.status, r.window_start, r.window_end, r.gx_success, r.published_at, "
            "r.base_id, r.version, left(r.manifest_hash, 12) AS manifest, coalesce(v.is_current, false) AS current, "
            "v.reason, v.changes FROM releases r JOIN release_versions v USING (release_id) "
            "ORDER BY r.base_id, r.version")).mappings().all()
        return [dict(r) | release_counts(conn, r["release_id"]) for r in rows]


def format_releases(releases: list[dict], as_json: bool = False) -> str:
    if as_json:
        return json.dumps(releases, default=str, indent=2)
    if not releases:
        return "no releases yet"
    cols = ["release_id", "version", "source", "status", "window_start", "window_end", "papers_seen", "queries",
            "references", "resolved", "important", "nuggets", "gx_success", "manifest"]
    table = [[_short(r.get(c)) for c in cols] for r in releases]
    out = tabulate(table, headers=cols, tablefmt="simple", disable_numparse=True)
    changelog = [f"  {r['release_id']}: {r['changes'] or 'not published yet'} (why: {r['reason']})"
                 for r in releases if r.get("reason")]
    return out + ("\n\nchangelog (a published release never changes; a correction is its next version):\n"
                  + "\n".join(changelog) if changelog else "")


def _short(value):
    return value.date().isoformat() if hasattr(value, "date") and callable(value.date) else value


def release_summary(engine: Engine, release_id: str) -> dict:
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT r.release_id, r.status, r.source, r.gx_success, r.gx_result, "
            "r.config -> 'max_queries' AS max_queries, r.config -> 'sample_seed' AS sample_seed, r.base_id, "
            "r.version, r.manifest_hash, v.is_current, v.previous_release, v.reason, v.changes "
            "FROM releases r JOIN release_versions v USING (release_id) WHERE r.release_id = :r"),
            {"r": release_id}).mappings().first()
        if row is None:
            raise NotFound(f"no release {release_id}; `deepscholar release list` lists the releases there are")
        stages = conn.execute(sa.text(
            "SELECT stage, status, coalesce(reason, '') AS reason, count(*) AS n FROM release_candidates "
            "WHERE release_id = :r GROUP BY 1, 2, 3"), {"r": release_id}).mappings().all()
        counts = release_counts(conn, release_id)
    failed = [c["name"] for c in (row["gx_result"] or {}).get("checks", []) if not c.get("success")]
    return dict(row) | counts | {"candidates": [dict(s) for s in stages], "gx_failed_checks": failed}


def print_release_summary(engine: Engine, release_id: str) -> None:
    try:
        s = release_summary(engine, release_id)
    except LookupError as exc:
        print(str(exc))
        return
    seen = s["papers_seen"]
    order = ["version", "venue", "sample", "source", "section", "bibliography"]
    dropped: dict[str, int] = {}
    for c in s["candidates"]:
        if c["status"] != "kept":
            dropped[c["stage"]] = dropped.get(c["stage"], 0) + c["n"]
    print(f"\nRelease {release_id}: status {s['status']}, version {s['version']} of {s['base_id']}"
          f"{' (current)' if s['is_current'] else ''}")
    print(f"  manifest hash                  {s['manifest_hash'] or '- (not sealed)'}")
    if s["previous_release"]:
        print(f"  corrects                       {s['previous_release']}: {s['reason']}")
        print(f"  changes                        {s['changes'] or '- (written when it is published)'}")
    print(f"  papers seen by the search      {seen}")
    remaining = seen
    for stage in order:
        remaining -= dropped.get(stage, 0)
        if stage == "sample":
            cap = "no cap" if s["max_queries"] is None else f"max_queries {s['max_queries']}, seed {s['sample_seed']}"
            print(f"  sampled ({cap})".ljust(33) + str(remaining))
        else:
            print(f"  kept after {stage:<19} {remaining}")
    print(f"  drop reasons                   {s['dropped'] or '-'}")
    print(f"  queries                        {s['queries']}")
    print(f"  references (cited, with bib)   {s['references']}")
    print(f"  resolved (arXiv or OpenAlex)   {s['resolved']} ({s['resolved_arxiv']} on arXiv)")
    print(f"  important references           {s['important']}")
    print(f"  nuggets                        {s['nuggets']} ({s['vital_nuggets']} vital)")
    gx = "passed" if s["gx_success"] else ("FAILED: " + ", ".join(s["gx_failed_checks"])
                                           if s["gx_success"] is False else "not run")
    print(f"  Great Expectations gate        {gx}")
