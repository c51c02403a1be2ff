"""`deepscholar site build`, `site publish`: the boards as a static site, and its publication (docs/SITE.md)."""

from __future__ import annotations

import json
from pathlib import Path

from deepscholar.cli.common import ready_engine


def add_commands(sub) -> None:
    """site build, site publish."""
    site = sub.add_parser("site", help="the static site of the boards").add_subparsers(
        dest="site_command", required=True)
    p = site.add_parser("build", help="write the static site of the warehouse into a folder")
    p.add_argument("--out", required=True, help="the site's folder (an earlier build there is replaced, and its "
                                                "unchanged parts reused)")
    p.add_argument("--full", action="store_true", help="render every page again, reusing nothing of an earlier build")
    p.add_argument("--no-reports", action="store_true", help="without the per-report pages")
    p.add_argument("--no-downloads", action="store_true", help="without each month's export files")
    p.add_argument("--json", action="store_true", help="print the build's figures as JSON")
    p.set_defaults(func=cmd_site_build)

    p = site.add_parser("publish", help="publish a built site to DEEPSCHOLAR_SITE_URL (or --url)")
    p.add_argument("--from", dest="source", required=True, metavar="DIR", help="a folder `site build` wrote")
    p.add_argument("--url", default=None, help="a path, file://, s3://, ... (default: DEEPSCHOLAR_SITE_URL, "
                                               "else site/ under DEEPSCHOLAR_HOME)")
    p.set_defaults(func=cmd_site_publish)


def cmd_site_build(args) -> int:
    from deepscholar.site.build import build_site, is_built_site

    out = Path(args.out)
    previous = out if is_built_site(out) and not args.full else None
    build = build_site(ready_engine(), out, with_reports=not args.no_reports, with_downloads=not args.no_downloads,
                       previous=previous)
    size = sum(build.sizes.values())
    if args.json:
        print(json.dumps({"out": str(build.out), "files": len(build.files), "bytes": size,
                          "seconds": round(build.seconds, 2), "site": build.digest, "reused": build.reused,
                          "rendered": build.rendered}))
    else:
        print(f"site built in {build.out}: {len(build.files)} files, {size / 1e6:.1f} MB, {build.seconds:.1f} s "
              f"({build.parts_text()}); open {(build.out / 'index.html').resolve().as_uri()}")
    return 0


def cmd_site_publish(args) -> int:
    from deepscholar.site.publish import publish_site, site_url

    url = args.url or site_url()
    done = publish_site(Path(args.source), url)
    if done.unchanged:
        print(f"{url} already shows this site (build {done.build_id}): nothing written")
    else:
        print(f"published build {done.build_id} to {url}: {done.uploaded} files uploaded, {done.reused} kept "
              f"({done.seconds:.1f} s)")
    return 0
