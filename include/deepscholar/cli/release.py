"""`deepscholar release list | build | enrich | licences | summary | import-official`, `export`: the monthly
releases, listed, built, inspected, imported and exported. `releases` and `import-official` are the older
spellings of `release list` and `release import-official` (aliases: same arguments and output)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deepscholar.cli.common import comma_list, named_release, non_negative_int, ready_engine

LIST_HELP = "list releases with status, window and counts"
IMPORT_OFFICIAL_HELP = "load the published DeepScholar-bench dataset as a release"


def add_commands(sub) -> None:
    """releases (alias), release build | enrich | licences | summary | list | import-official, export,
    import-official (alias)."""
    _add_list_args(sub.add_parser("releases", help=LIST_HELP))

    rel = sub.add_parser("release", help="build or inspect one release").add_subparsers(
        dest="release_command", required=True)
    _add_build_and_enrich(rel)
    p = rel.add_parser("summary", help="what a release kept, dropped and why")
    p.add_argument("release")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_release_summary)
    _add_list_args(rel.add_parser("list", help=LIST_HELP))
    _add_import_official_args(rel.add_parser("import-official", help=IMPORT_OFFICIAL_HELP))

    p = sub.add_parser("export", help="write a month's dataset, reports, judgments, scores and boards as CSV and "
                                      "Parquet files with a datacard (README.md)")
    p.add_argument("--release", required=True, help="the release, e.g. 2025-06")
    p.add_argument("--out", required=True, help="folder to write into (created)")
    p.add_argument("--judge", default=None, help="judge config (or 'local' / a model) to export; default: every "
                                                  "judge with a board")
    p.set_defaults(func=cmd_export)

    _add_import_official_args(sub.add_parser("import-official", help=IMPORT_OFFICIAL_HELP))


def _add_list_args(p) -> None:
    """`release list` and its alias `releases`."""
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_release_list)


def _add_import_official_args(p) -> None:
    """`release import-official` and its alias `import-official`."""
    p.add_argument("directory", help="folder holding dataset/ and nuggets/")
    p.add_argument("--release", required=True, help="release id to store it under")
    p.set_defaults(func=cmd_release_import_official)


def _add_build_and_enrich(rel) -> None:
    """release build | enrich | licences: the steps that write a release."""
    p = rel.add_parser("build", help="build month M outside Airflow (same code as the DAG)")
    p.add_argument("month", help="YYYY-MM")
    p.add_argument("--judge", default=None, help="'local' or a litellm model string")
    p.add_argument("--max-queries", type=non_negative_int, default=None,
                   help="at most this many queries, a seeded sample stratified by primary category; 0 = no cap "
                        "(default: DEEPSCHOLAR_MAX_QUERIES, else 200)")
    p.add_argument("--seed", type=int, default=None, help="seed of the sample (default: DEEPSCHOLAR_SAMPLE_SEED, else 0)")
    p.add_argument("--reason", default=None,
                   help="why the month is built again: a published month is never changed in place, so this "
                        "builds its next version (M.v2, ...) and writes the reason in its changelog")
    p.set_defaults(func=cmd_release_build)
    p = rel.add_parser("enrich", help="add evaluation tracks' release-time artefacts to a release, even a published "
                                      "one (its queries, references, nuggets and status are left as they are)")
    p.add_argument("month", help="the release, e.g. 2025-06")
    p.add_argument("--tracks", nargs="+", required=True, metavar="TRACK",
                   help="race, claims (comma- or space-separated)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_release_enrich)
    p = rel.add_parser("licences", help="fetch the licences of a month's query papers from arXiv's OAI-PMH (also for "
                                        "a published, sealed month: only paper_licences is written)")
    p.add_argument("month", help="the release, e.g. 2025-06")
    p.set_defaults(func=cmd_release_licences)


def cmd_release_list(args) -> int:
    from deepscholar.reporting import format_releases, list_releases

    print(format_releases(list_releases(ready_engine()), as_json=args.json))
    return 0


def cmd_release_build(args) -> int:
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.release.versions import parse_version
    from deepscholar.reporting import print_release_summary

    engine = ready_engine()
    spec = ReleaseSpec.from_env(judge=args.judge, max_queries=args.max_queries, sample_seed=args.seed)
    result = build_release(engine, args.month, spec, reason=args.reason)
    built = result["release_id"]
    base, n = parse_version(built)
    print(f"built release {built} (version {n or 1} of {base}): "
          f"{'published' if result['gx_success'] else 'failed its quality gate'}")
    print_release_summary(engine, built)
    return 0 if result["gx_success"] else 1


def cmd_release_enrich(args) -> int:
    from deepscholar.release.context import ReleaseContext
    from deepscholar.release.steps import enrich_release
    from deepscholar.reporting import release_summary

    engine = ready_engine()
    release_id = named_release(engine, args.month)
    release_summary(engine, release_id)  # NotFound (a UserError) for an unknown release
    result = enrich_release(ReleaseContext.load(engine, release_id), comma_list(args.tracks) or [])
    if args.json:
        print(json.dumps(result, default=str, indent=2))
    else:
        for track, counts in result["tracks"].items():
            print(f"{release_id} {track}: {', '.join(f'{k} {v}' for k, v in counts.items())}")
        print(result["summary"])
    return 0 if result["gx_success"] else 1


def cmd_release_licences(args) -> int:
    """Fetch the licences a month's query papers lack (writes only paper_licences: works on a sealed release)."""
    from deepscholar.release.context import ReleaseContext
    from deepscholar.release.licences import fetch_licences
    from deepscholar.reporting import release_summary

    engine = ready_engine()
    release_summary(engine, args.month)  # NotFound (a UserError) for an unknown release
    counts = fetch_licences(ReleaseContext.load(engine, args.month))
    print(f"{args.month} licences: {counts['papers']} query papers ({counts['looked_up']} looked up now): "
          f"{counts['redistributable']} allow redistribution, {counts['not_redistributable']} do not, "
          f"{counts['unknown']} unknown, {counts['never_fetched']} not fetched")
    return 0


def cmd_release_summary(args) -> int:
    from deepscholar.reporting import print_release_summary, release_summary

    engine = ready_engine()
    release_id = named_release(engine, args.release)
    summary = release_summary(engine, release_id)  # NotFound (a UserError) for an unknown release
    if args.json:
        print(json.dumps(summary, default=str, indent=2))
    else:
        print_release_summary(engine, release_id)
    return 0


def cmd_export(args) -> int:
    from deepscholar.export import export_release

    result = export_release(ready_engine(), args.release, Path(args.out), judge=args.judge)
    for line in result.warnings:
        print(f"deepscholar: warning: {line}", file=sys.stderr)
    print(f"exported {args.release} to {result.out} ({', '.join(result.formats)}, README.md): "
          + ", ".join(f"{name} {n}" for name, n in result.rows.items())
          + f"; texts withheld for their licence: {result.withheld_papers} papers, {result.withheld_reports} reports")
    return 0


def cmd_release_import_official(args) -> int:
    from deepscholar.release.official_import import import_official

    summary = import_official(ready_engine(), Path(args.directory), args.release)
    print(json.dumps(summary if isinstance(summary, dict) else getattr(summary, "__dict__", summary),
                     default=str, indent=2))
    return 0
