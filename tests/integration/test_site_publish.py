"""Publishing a built site: a local folder, and S3 through moto's server (a real S3 API over HTTP on loopback),
addressed by URL (fsspec) and by Airflow's ObjectStoragePath with an Airflow connection.

The sites are small folders with a manifest, as `site build` leaves them (the build itself is checked in
test_site.py). Each target is read back as a reader would: through its switch (the `current` link, or the
root index.html's redirect and the `current` object).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

# Airflow reads its home at first import (ObjectStoragePath); never touch ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow_home_"))

import pytest  # noqa: E402

from deepscholar.site.build import MANIFEST_FILE, STAMP_FILE  # noqa: E402
from deepscholar.site.publish import publish_site, published_build, storage_of  # noqa: E402

BUCKET = "deepscholar-site"


def make_site(folder: Path, pages: dict[str, str]) -> Path:
    """A built site folder: the pages, their manifest and a stamp."""
    for path, text in pages.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    files = {p: hashlib.sha256(t.encode()).hexdigest() for p, t in sorted(pages.items())}
    (folder / MANIFEST_FILE).write_text(json.dumps({"files": files}, indent=1, sort_keys=True) + "\n")
    (folder / STAMP_FILE).write_text(json.dumps({"built_at": str(folder)}) + "\n")
    return folder


def read(target, path: str) -> str:
    """A file of the site readers see now at `target`."""
    fs, root, local = storage_of(target)
    if local:
        return (Path(root) / "current" / path).read_text()
    index = fs.cat_file(f"{root}/index.html").decode()
    build = re.search(r'url=builds/([^/]+)/index\.html', index).group(1)
    assert build == published_build(target)
    return fs.cat_file(f"{root}/builds/{build}/{path}").decode()


def builds(target) -> list[str]:
    fs, root, _ = storage_of(target)
    return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{root}/builds", detail=False))


@pytest.fixture(scope="module")
def moto_s3():
    """moto's S3 server on a free loopback port, with a bucket; the AWS client variables pointed at it."""
    pytest.importorskip("s3fs", reason="s3fs (the S3 fsspec driver) is needed for s3:// targets")
    server_mod = pytest.importorskip("moto.server", reason="moto[server] runs the local S3 endpoint")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint,
           "AIRFLOW_CONN_SITE_S3": json.dumps({"conn_type": "aws", "login": "testing", "password": "testing",
                                               "extra": {"endpoint_url": endpoint, "region_name": "us-east-1"}})}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    server.stop()


@pytest.fixture(params=["local", "s3-url", "s3-object-storage"])
def target(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "published")
    request.getfixturevalue("moto_s3")
    prefix = f"s3://{BUCKET}/{request.node.name.replace('[', '-').rstrip(']')}"
    if request.param == "s3-url":
        return prefix
    from airflow.sdk import ObjectStoragePath

    return ObjectStoragePath(prefix, conn_id="site_s3")


def test_publishing_switches_once_and_sends_only_what_changed(target, tmp_path):
    first = make_site(tmp_path / "a", {"index.html": "board v1", "system/x/index.html": "x", "api/b.json": "{}"})
    done = publish_site(first, target)
    assert (done.uploaded, done.reused) == (3, 0)
    assert read(target, "index.html") == "board v1" and read(target, "system/x/index.html") == "x"
    assert published_build(target) == done.build_id

    again = publish_site(first, target)  # the same site: nothing is written, readers stay where they are
    assert again.unchanged and again.build_id == done.build_id and builds(target) == [done.build_id]

    second = make_site(tmp_path / "b", {"index.html": "board v2", "system/x/index.html": "x", "api/b.json": "{}",
                                        "system/y/index.html": "y"})
    moved = publish_site(second, target)
    assert (moved.uploaded, moved.reused) == (2, 2)  # the changed index and the new page
    assert read(target, "index.html") == "board v2" and read(target, "system/y/index.html") == "y"
    assert builds(target) == sorted([done.build_id, moved.build_id])  # the old build stays for readers mid-visit
    fs, root, local = storage_of(target)
    if local:  # kept files are hard links to the published build's, not copies
        old, new = Path(root) / "builds" / done.build_id, Path(root) / "builds" / moved.build_id
        assert (old / "api/b.json").stat().st_ino == (new / "api/b.json").stat().st_ino
        assert (old / "index.html").stat().st_ino != (new / "index.html").stat().st_ino


def test_a_failed_publication_leaves_readers_on_the_published_site(target, tmp_path):
    good = make_site(tmp_path / "good", {"index.html": "good", "a.html": "a"})
    published = publish_site(good, target).build_id
    broken = make_site(tmp_path / "broken", {"index.html": "half", "a.html": "new a", "z.html": "z"})
    (broken / "z.html").unlink()  # fails part-way, after index.html and a.html were sent
    with pytest.raises(FileNotFoundError):
        publish_site(broken, target)
    assert published_build(target) == published
    assert read(target, "index.html") == "good" and read(target, "a.html") == "a"


def test_only_the_newest_builds_are_kept(target, tmp_path):
    ids = [publish_site(make_site(tmp_path / str(i), {"index.html": f"v{i}"}), target, keep=2).build_id
           for i in range(4)]
    assert builds(target) == sorted(ids[-2:])
    assert read(target, "index.html") == "v3"
