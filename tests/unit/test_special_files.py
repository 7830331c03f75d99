"""Every file boundary against every class of special file: wherever jaxrel reads a file (a release folder's
artifacts and manifest, a version file, the changelog, the family's pyproject, the history store, ``--matrix``
JSON), a FIFO, a socket, a device, a directory, a dangling symlink or a link out of the tree is one line with a
defined exit code (never 70, never a traceback), never a read that blocks (each run is under
:data:`fuzzing.DEADLINE`), and nothing in the tree changes. ``release verify`` on a folder holding a FIFO used to
hang until killed; ``release bump`` replaced a symlinked version file with a regular file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest
from fuzzing import assert_handled, digests, run_cli

from jaxrel.release import manifest

REPO = Path(__file__).resolve().parents[2]
SPLITFAM = REPO / "tests" / "data" / "splitfam"
DEAD_INDEX = "http://127.0.0.1:9/simple/"
KINDS = ("fifo", "socket", "directory", "dangling", "device", "outside")
WHEEL = "x-0.1.0-py3-none-any.whl"


def _plant(path: Path, kind: str, outside: Path) -> socket.socket | None:
    """Replace ``path`` by a special file of ``kind`` (a socket is returned: it lives while it is open)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":  # bound at a short path (AF_UNIX allows ~100 bytes), then moved into place
        short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp")) / "s"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(short))
        os.rename(short, path)
        short.parent.rmdir()
        return server
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(path.parent / "no-such-file")
    elif kind == "device":
        path.symlink_to("/dev/zero")  # endless: a read would never end
    else:
        path.symlink_to(outside)
    return None


def _dist(root: Path) -> Path:
    dist = root / "dist"
    dist.mkdir()
    (dist / WHEEL).write_bytes(b"x")
    manifest.Manifest("splitfam", "0.1.0", "v0.1.0", None, (manifest.Artifact(
        WHEEL, "x", "0.1.0", "extension", "wheel", hashlib.sha256(b"x").hexdigest(), 1),)).write(dist)
    return dist


PLACES = {  # where the special file goes, relative to a copy of the sample project; the verbs that read it
    "dist/y-0.1.0-py3-none-any.whl": [["release", "verify", "{root}/dist"], ["release", "publish", "{root}/dist",
                                      "--dry-run"], ["release", "collect", "{root}/dist", "--output", "{root}/out"]],
    "dist/manifest.json": [["release", "verify", "{root}/dist"], ["release", "attest", "{root}/dist"]],
    "frontend/splitfam/version.py": [["release", "bump", "0.2.0"],
                                     ["release", "check", "{root}", "--index-url", DEAD_INDEX]],
    "CHANGELOG.md": [["release", "check", "{root}", "--index-url", DEAD_INDEX]],
    "pyproject.toml": [["verdict", "splitfam-core==0.1.0", "--family", "{root}/pyproject.toml"],
                       ["release", "plan", "--index-url", DEAD_INDEX]],
    "history.sqlite": [["history", "query", "splitfam==0.1.0", "--db", "{root}/history.sqlite"],
                       ["history", "publish", "--db", "{root}/history.sqlite", "--output", "{root}/site"]],
    "matrix.json": [["gates", str(REPO / "tests" / "data" / "gates_tree"), "--matrix", "{root}/matrix.json"]],
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("special") / "splitfam"
    shutil.copytree(SPLITFAM, root)
    _dist(root)
    return root


CASES = [(place, verb, kind) for place, verbs in sorted(PLACES.items()) for verb in range(len(verbs)) for kind in KINDS]


@pytest.mark.parametrize(("place", "pick", "kind"), CASES, ids=[f"{p}-{v}-{k}" for p, v, k in CASES])
def test_a_special_file_wherever_one_is_read_is_one_line(place: str, pick: int, kind: str, template: Path,
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "splitfam"
    shutil.copytree(template, root, symlinks=True)
    outside = root.parent / "outside.txt"
    outside.write_text("_version = '0.1.0'\n")
    held = _plant(root / place, kind, outside)
    try:
        verbs = PLACES[place]
        argv = [part.format(root=root) for part in verbs[pick]]
        if argv[0] == "release" and argv[1] in ("bump", "plan", "publish", "collect", "verify", "attest"):
            argv += ["--project", str(root)]
        before = digests(root, skip=[root / "out", root / "site"]) | digests(outside.parent, skip=[root])
        code, _, err = run_cli(capsys, argv)
        assert_handled(argv, code, err)
        assert code in (0, 1, 2, 3)
        assert digests(root, skip=[root / "out", root / "site"]) | digests(outside.parent, skip=[root]) == before
        if kind != "outside" or place.startswith("dist/"):  # a link out of the tree is read as the file it names
            assert code != 0 or place in ("CHANGELOG.md",), f"{' '.join(argv)}: a {kind} at {place} passed"
    finally:
        if held is not None:
            held.close()
