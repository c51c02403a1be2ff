"""The public site: the boards as static files built from the warehouse, and their publication to a URL.

- routes.py: where each page lives and the live page's links mapped to the site's files;
- pages.py: the board, history, system and report pages, rendered by the live page's templates;
- documents.py: methodology, how to submit, downloads; json_mirror.py: every board's API answer as a file;
- build.py: `build_site` (deterministic but for one stamp file, with a manifest of hashes);
- publish.py: `publish_site` to a local folder, s3:// or anything fsspec reaches (docs/SITE.md).
"""
