"""jaxrel's index client against loopback indexes that behave as real ones do, each compared with pip.

Each index serves ``probe`` (1.0 and 2.0, the newest wheel with its METADATA far from the wheel's end)
one way: PEP 503 HTML only; JSON without PEP 700 sizes; no PEP 658; PEP 658 with its digest; PEP 658
with a wrong digest; a server that ignores ``Range``; one that answers 503 twice before each answer;
one that resets each connection once. jaxrel's listing, METADATA and download must give pip's answer
(``pip install --dry-run --report``: the version pip picks and its ``Requires-Dist``); the wrong digest
is refused naming both hashes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from simple_index import Behaviour, SimpleIndexServer, make_wheel

from jaxrel.distributions.index import Index
from jaxrel.distributions.pipconfig import pip_command
from jaxrel.distributions.remote_metadata import MetadataReader, RemoteMetadataError
from jaxrel.distributions.transport import Limits

REQUIRES = ('numpy>=2', 'rich; extra == "fancy"')
BEHAVIOURS = {
    "html-only": Behaviour(json=False),
    "json-without-size": Behaviour(sizes=False),
    "no-pep658": Behaviour(),
    "pep658": Behaviour(pep658=True),
    "html-pep658": Behaviour(json=False, pep658=True),
    "pep658-wrong-digest": Behaviour(pep658=True, wrong_digest=True),
    "ignores-range": Behaviour(ranges=False, json=False),
    "503-twice": Behaviour(fail_503=2),
    "reset-once": Behaviour(reset_once=True),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleIndexServer]:
    root = tmp_path_factory.mktemp("behaviours")
    old = make_wheel(root / "old", "probe", "1.0", ("numpy",))
    new = make_wheel(root / "new", "probe", "2.0", REQUIRES, padding=900_000)  # METADATA outside the tail read
    with SimpleIndexServer() as served:
        for name, behaviour in BEHAVIOURS.items():
            served.add(name, behaviour, probe=[old, new])
        yield served


def _pip_answer(url: str, tmp_path: Path) -> tuple[str | None, list[str], str]:
    """The version pip picks from ``url`` alone, its Requires-Dist, and what pip said."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    done = subprocess.run([*pip_command(), "install", "--isolated", "--dry-run", "--ignore-installed", "--no-deps",
                           "--no-cache-dir", "--index-url", url, "--report", str(report), "probe"],
                          capture_output=True, text=True, env={**env, "PIP_CONFIG_FILE": os.devnull}, timeout=300)
    if done.returncode != 0:
        return None, [], done.stdout + done.stderr
    item = json.loads(report.read_text())["install"][0]["metadata"]
    return item["version"], item.get("requires_dist", []), done.stdout + done.stderr


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_listing_metadata_and_download_give_pips_answer(behaviour: str, server: SimpleIndexServer,
                                                        tmp_path: Path) -> None:
    url = server.url(behaviour)
    pip_version, pip_requires, said = _pip_answer(url, tmp_path)

    server.reset_log()
    index = Index([url], cache=tmp_path / "cache", refresh=True, limits=Limits(connect=10, deadline=60))
    listing = index.listing("probe")
    assert [str(v) for v in listing.versions()] == ["1.0", "2.0"]
    newest = next(f for f in listing.files if str(f.version) == "2.0")
    reader = MetadataReader(limits=index.limits, cache=tmp_path / "metadata")
    if behaviour == "pep658-wrong-digest":
        with pytest.raises(RemoteMetadataError, match=r"sha256 [0-9a-f]{64}, but the index lists [0-9a-f]{64}"):
            reader.metadata(newest)
        assert pip_version is None, "pip accepted METADATA whose digest the index contradicts"
        assert "hash" in said.lower() or "digest" in said.lower() or "metadata" in said.lower()
        return
    assert pip_version == "2.0", said
    metadata = reader.metadata(newest)
    assert sorted(metadata.requires_dist) == sorted(pip_requires)
    if behaviour in ("pep658", "html-pep658"):
        assert any(r.path.endswith(".metadata") for r in server.requests)
        assert not any("Range" in r.headers for r in server.requests)
    elif behaviour == "ignores-range":
        assert any("Range" in r.headers for r in server.requests)  # asked; the server sent the whole wheel
    else:
        ranged = [r for r in server.requests if "Range" in r.headers and r.path.endswith("-2.0-py3-none-any.whl")]
        assert len({r.headers["Range"] for r in ranged}) == 2  # the tail, then the METADATA further in
    assert reader.metadata(newest) == metadata and reader.cached == 1  # the second answer is the cache's
    path = index.download(newest)
    assert path.read_bytes() == (Path(server.indexes[behaviour].projects["probe"][1])).read_bytes()


def test_connections_are_kept_alive_within_a_run(server: SimpleIndexServer, tmp_path: Path) -> None:
    server.reset_log()
    before = server.connections
    index = Index([server.url("no-pep658")], cache=tmp_path / "cache", refresh=True)
    reader = MetadataReader(limits=index.limits, cache=tmp_path / "metadata")
    for file in index.listing("probe").files:
        reader.metadata(file)
    requests = len(server.requests)
    assert requests >= 4
    assert server.connections - before < requests  # one connection served several requests


def test_retries_stop_where_the_deadline_would_pass(tmp_path: Path) -> None:
    """A Retry-After longer than the deadline leaves no room for another try: the 503 is the answer, at once."""
    wheel = make_wheel(tmp_path / "w", "probe", "1.0")
    with SimpleIndexServer() as served:
        served.add("busy", Behaviour(fail_503=1, retry_after="3600"), probe=[wheel])
        served.add("soon", Behaviour(fail_503=1, retry_after="0"), probe=[wheel])
        index = Index([served.url("busy")], cache=tmp_path / "c1", refresh=True, limits=Limits(connect=2, deadline=5))
        with pytest.raises(Exception, match="HTTP 503 Service Unavailable"):
            index.listing("probe")
        index = Index([served.url("soon")], cache=tmp_path / "c2", refresh=True, limits=Limits(connect=2, deadline=5))
        assert [str(v) for v in index.listing("probe").versions()] == ["1.0"]
        assert len([r for r in served.requests if r.index == "soon"]) == 2


def test_no_retries_when_asked(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "probe", "1.0")
    with SimpleIndexServer() as served:
        served.add("busy", Behaviour(fail_503=1), probe=[wheel])
        index = Index([served.url("busy")], cache=tmp_path / "c", refresh=True,
                      limits=Limits(connect=2, deadline=20, retries=0))
        with pytest.raises(Exception, match="HTTP 503"):
            index.listing("probe")
        assert len(served.requests) == 1


def test_a_real_pypiserver_gives_pips_answer(pypiserver_factory: object, tmp_path: Path) -> None:
    """pypiserver serves PEP 503 HTML only (no sizes, no PEP 658): listing, METADATA by range reads and the
    download agree with pip on it."""
    server = pypiserver_factory()  # type: ignore[operator]
    for version, requires, padding in (("1.0", ("numpy",), 0), ("2.0", REQUIRES, 900_000)):
        wheel = make_wheel(tmp_path / version, "probe", version, requires, padding=padding)
        (server.packages / wheel.name).write_bytes(wheel.read_bytes())
    pip_version, pip_requires, said = _pip_answer(server.simple_url, tmp_path)
    assert pip_version == "2.0", said
    index = Index([server.simple_url], cache=tmp_path / "cache", refresh=True)
    listing = index.listing("probe")
    assert [str(v) for v in listing.versions()] == ["1.0", "2.0"]
    newest = next(f for f in listing.files if str(f.version) == "2.0")
    assert newest.size is None and not newest.metadata  # what HTML pages leave out
    metadata = MetadataReader(limits=index.limits, cache=tmp_path / "metadata").metadata(newest)
    assert sorted(metadata.requires_dist) == sorted(pip_requires)
    assert index.download(newest).read_bytes() == (server.packages / newest.filename).read_bytes()


AUDITED = ("no-pep658", "html-only", "json-without-size", "ignores-range", "503-twice", "reset-once", "pep658")


def test_the_audit_gives_the_same_findings_through_every_behaviour(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A jax-shaped family (tests/matrix_family.py) with one planted defect (a plugin pinning another pjrt),
    audited through each behaviour: the same findings every time, and the defect among them."""
    from matrix_family import build_matrix, project, wheel

    from jaxrel.distributions.filenames import name_and_version
    from jaxrel.release import audit
    from jaxrel.release.project import open_project

    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    built = build_matrix(tmp_path / "artifacts")
    files = [p for p in built.rglob("*.whl")]
    bad = next(p for p in files if p.name.startswith("mfam_gpu_plugin-") and "cp312" in p.name)
    bad.unlink()
    files.remove(bad)
    files.append(wheel(tmp_path / "bad", "mfam-gpu-plugin", "0.2.0", bad.name.split("-", 2)[2].removesuffix(".whl"),
                       requires=("mfam-gpu-pjrt==0.1.0",)))
    projects: dict[str, list[Path]] = {}
    for path in files:
        projects.setdefault(name_and_version(path.name)[0], []).append(path)
    findings = {}
    with SimpleIndexServer() as served:
        for mode in AUDITED:
            served.add(mode, BEHAVIOURS[mode], **{name.replace("-", "_"): listed for name, listed in projects.items()})
        tree = project(tmp_path / "tree")
        for mode in AUDITED:
            with open_project(tree) as found:
                index = Index.from_pip(served.url(mode), refresh=True, cache=tmp_path / f"cache-{mode}")
                reader = MetadataReader(limits=index.limits, cache=tmp_path / f"metadata-{mode}")
                (result,) = audit.audit(found.family, found.release, index, ["0.2.0"], reader=reader)
            findings[mode] = sorted(f"{f.kind}: {f.detail}" for f in result.findings)
    assert all(found == findings["no-pep658"] for found in findings.values()), findings
    assert any("mfam-gpu-pjrt==0.1.0" in message for message in findings["no-pep658"]), findings
