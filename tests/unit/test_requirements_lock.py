"""The hash-checked locks still match the requirements files they were written from (`make lock`).

requirements*.txt list the direct pins; each *.lock is the full transitive closure with sha256 hashes,
installed with `pip install --require-hashes` by the Makefile (and so CI) and the Dockerfile. These
checks fail when someone edits a requirements file without re-running `make lock`, or hand-edits a
lock into something pip's hash mode would refuse.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
# lock -> the requirements files it closes over (the order of `make lock`).
LOCKS = {
    "requirements.lock": ["requirements.txt"],
    "requirements-models.lock": ["requirements.txt", "requirements-models.txt"],
    "requirements-celery.lock": ["requirements.txt", "requirements-celery.txt"],
    "requirements-dev.lock": ["requirements.txt", "requirements-models.txt", "requirements-celery.txt"],
    # The local judge server's own venv (`make localjudge`), apart from the others.
    "requirements-localjudge.lock": ["requirements-localjudge.txt"],
}
_ENTRY_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+?)(?:\s*;\s*(?P<marker>[^\\]+?))?\s*\\?$")
_HASH_RE = re.compile(r"^\s+--hash=sha256:(?P<hash>[0-9a-f]{64})\s*\\?$")


def direct_pins(*files: str) -> dict[str, tuple[str, Requirement]]:
    pins: dict[str, tuple[str, Requirement]] = {}
    for file in files:
        for line in (ROOT / file).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                req = Requirement(line)
                (spec,) = req.specifier
                assert spec.operator == "==", f"{file}: {line} is not an exact pin"
                pins[canonicalize_name(req.name)] = (file, req)
    return pins


def parse_lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes); fails on anything pip's hash-checking mode would refuse."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current = None
    for n, line in enumerate((ROOT / name).read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        entry = _ENTRY_RE.match(line)
        if entry:
            current = canonicalize_name(entry.group("name"))
            assert current not in entries, f"{name}:{n}: {current} listed twice"
            entries[current] = (entry.group("version"), [])
            continue
        digest = _HASH_RE.match(line)
        assert digest and current, f"{name}:{n}: not a pinned, hashed requirement: {line!r}"
        entries[current][1].append(digest.group("hash"))
    return entries


@pytest.fixture(scope="module")
def locks() -> dict[str, dict[str, tuple[str, list[str]]]]:
    missing = [name for name in LOCKS if not (ROOT / name).is_file()]
    assert not missing, f"missing {missing}: run `make lock`"
    return {name: parse_lock(name) for name in LOCKS}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_direct_pin_is_locked_at_its_version(locks, lock):
    entries = locks[lock]
    for name, (file, req) in direct_pins(*LOCKS[lock]).items():
        assert name in entries, f"{file} pins {req} but {lock} lacks it: run `make lock`"
        version = entries[name][0]
        # `==2.13.0` admits the local build 2.13.0+cpu (PEP 440), the torch file we lock; nothing else.
        assert Version(version) in SpecifierSet(str(req.specifier)), \
            f"{file} pins {req} but {lock} has {version}: run `make lock`"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_locked_entry_is_pinned_and_hashed(locks, lock):
    entries = locks[lock]
    assert len(entries) > len(direct_pins(*LOCKS[lock])), "a lock holds the transitive closure, not just the pins"
    for name, (_, hashes) in entries.items():
        assert hashes, f"{lock}: {name} has no hash (pip --require-hashes would refuse it)"
        assert len(set(hashes)) == len(hashes), f"{lock}: {name} repeats a hash"
    header = (ROOT / lock).read_text().splitlines()[:2]
    assert any("make lock" in line for line in header), f"{lock} should say how it is regenerated"


def test_the_locks_agree_where_they_overlap(locks):
    """The Dockerfile installs two locks side by side; pip accepts that only with equal pins and hashes."""
    core = locks["requirements.lock"]
    for lock in ("requirements-models.lock", "requirements-celery.lock"):
        for name, entry in core.items():
            assert locks[lock].get(name) == entry, f"{lock} differs from requirements.lock on {name}"
    models, celery = locks["requirements-models.lock"], locks["requirements-celery.lock"]
    for name in set(models) & set(celery):
        assert models[name] == celery[name], name
    # The development lock (make install, CI) is exactly the union of the two the image installs.
    assert locks["requirements-dev.lock"] == models | celery


def test_torch_is_the_cpu_build_pinned_by_one_file_hash(locks):
    version, hashes = locks["requirements-models.lock"]["torch"]
    assert version.endswith("+cpu"), "PyPI's torch is a CUDA build; the lock must name the CPU one"
    assert len(hashes) == 1
    assert "torch" not in locks["requirements.lock"], "an API-judged image carries no torch"
    assert not any(name.startswith("nvidia-") for name in locks["requirements-models.lock"])


def test_the_dev_lock_is_closed_under_dependencies(locks):
    """Walk the installed metadata from the direct pins: every dependency is locked at a fitting version.

    The environment the tests run in is installed from requirements-dev.lock, so its metadata is the
    locked packages' own; a package installed at another version means the environment has drifted.
    """
    lock = locks["requirements-dev.lock"]
    todo = [req for _, req in direct_pins(*LOCKS["requirements-dev.lock"]).values()]
    seen: set[tuple[str, frozenset[str]]] = set()
    reached: set[str] = set()
    conditional: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        assert name in lock, f"{req} is needed but not locked: run `make lock`"
        version = lock[name][0]
        assert req.specifier.contains(version, prereleases=True), f"{req} is not met by the locked {version}"
        reached.add(name)
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is locked but not installed: run `make install`")
        assert installed == version, f"{name} {installed} installed, {version} locked: run `make install`"
        for dep in metadata.requires(name) or []:
            dep_req = Requirement(dep)
            extras = {""} | set(req.extras)
            if dep_req.marker is None or any(dep_req.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dep_req)
            elif "extra" not in str(dep_req.marker):
                # Needed on other interpreters the lock covers (e.g. redis wants async-timeout before 3.11.3).
                conditional.add(canonicalize_name(dep_req.name))
    unneeded = set(lock) - reached - conditional
    assert not unneeded, f"locked but needed by nothing: {sorted(unneeded)}"
