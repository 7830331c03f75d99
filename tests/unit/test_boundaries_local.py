"""The typed boundaries for local data: each kind of file jaxrel reads from the user's disk is parsed
in one module that returns typed values or raises BadInput (exit 2) naming the file and the field.

Unit cases per boundary, then the wrong inputs through the command line in process: the exit code
the table defines, one line on stderr without a traceback, nothing written where it must not be.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import shutil
import signal
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxrel._util import localfiles, tarballs
from jaxrel._util.shape import Shape
from jaxrel.cli import main
from jaxrel.errors import BadInput
from jaxrel.release import manifest
from jaxrel.release.pypirc import read_pypirc

REPO = Path(__file__).resolve().parents[2]
SPLITFAM = REPO / "tests" / "data" / "splitfam"
DEAD_INDEX = "http://127.0.0.1:9/simple/"
DEADLINE = 60


def _empty_index(tmp_path: Path) -> str:
    """A reachable index that lists nothing (an unreachable one makes release check exit 3)."""
    folder = tmp_path / "empty-index"
    folder.mkdir(exist_ok=True)
    return folder.as_uri() + "/"

# -- the one reader ----------------------------------------------------------------------------------


def test_the_reader_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match=r"pipe.toml: a FIFO, not a regular file"):
        localfiles.read_bytes(fifo)  # opened O_NONBLOCK: a FIFO with no writer does not block


def test_every_other_reader_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    from jaxrel._util.files import sha256_of
    from jaxrel._util.literals import read_text
    from jaxrel.gating import read_api_number
    from jaxrel.guard import read_assignment

    os.mkfifo(tmp_path / "x.whl")
    with pytest.raises(BadInput, match="not a regular file"):
        sha256_of(tmp_path / "x.whl")  # a dist file
    os.mkfifo(tmp_path / "version.py")
    assert read_text(str(tmp_path / "version.py")) is None
    assert read_assignment(str(tmp_path / "version.py"), ("_version",)) is None  # the guard's own copy
    assert read_api_number("version.py", "_version", [str(tmp_path)]) is None


def test_the_reader_refuses_devices_directories_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="character device"):
        localfiles.read_bytes("/dev/zero")
    with pytest.raises(BadInput, match="a directory"):
        localfiles.read_bytes(tmp_path)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(BadInput, match="larger than"):
        localfiles.read_bytes(big, limit=1024)
    with pytest.raises(BadInput, match="file not found"):
        localfiles.read_bytes(tmp_path / "missing")


def test_text_keeps_line_ends_and_names_the_first_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "CHANGELOG.md"
    path.write_bytes(b"# 1.0\r\n")
    assert localfiles.read_text(path) == "# 1.0\r\n"
    path.write_bytes("# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(BadInput, match=r"CHANGELOG.md: not UTF-8 text \(byte 5 is 0xe9\)"):
        localfiles.read_text(path)


@pytest.mark.parametrize(("text", "says"), [
    ("a = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ("a = " + "{b = " * 3000 + "1" + "}" * 3000, "nested too deeply"),
    ("a = " + "9" * 5000, "cannot read"),
    ("a = 1\na = 2\n", "not valid TOML"),
    ("[a\n", "not valid TOML"),
])
def test_toml_that_python_cannot_hold_is_bad_input(text: str, says: str) -> None:
    with pytest.raises(BadInput, match=says):
        localfiles.loads_toml(text, "pyproject.toml")


@pytest.mark.parametrize(("text", "says"), [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("9" * 5000, "not JSON"),
    ('{"a": 1, "a": 2}', "given twice"),
    ("NaN", "not JSON"),
    (b"\xff\xfe{}", "not"),
])
def test_json_that_is_not_plain_json_is_bad_input(text: str | bytes, says: str) -> None:
    with pytest.raises(BadInput, match=says):
        localfiles.loads_json(text, "report.json")


@pytest.mark.parametrize("damage", [b"{", b"[" * 100_000, b"\xff", b"9" * 5000, None])  # None: a FIFO
def test_a_damaged_cache_entry_is_dropped_not_trusted(tmp_path: Path, damage: bytes | None) -> None:
    entry = tmp_path / "entry.json"
    if damage is None:
        os.mkfifo(entry)
    else:
        entry.write_bytes(damage)
    assert localfiles.load_cached_json(entry) is None and not os.path.lexists(entry)
    entry.write_text('{"files": []}')
    assert localfiles.load_cached_json(entry) == {"files": []}
    assert localfiles.load_cached_json(tmp_path / "missing.json") is None


def test_inside_refuses_dotdot_absolute_and_symlinks_out(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    assert localfiles.inside(tree, "pkg/version.py", what="x") == (tree / "pkg/version.py").resolve()
    for bad in ("pkg/../../../etc/hostname", "/etc/hostname"):
        with pytest.raises(BadInput, match="leads outside"):
            localfiles.inside(tree, bad, what="version-file")
    (tree / "pkg" / "version.py").symlink_to("/etc/hostname")
    with pytest.raises(BadInput, match="leads outside"):
        localfiles.inside(tree, "pkg/version.py", what="version-file")


def test_shape_names_the_file_the_place_the_expected_and_the_found() -> None:
    shape = Shape("pyproject.toml")
    with pytest.raises(BadInput, match=r"^pyproject.toml: \[tool.x\] 'a' must be true or false, not 'yes'$"):
        shape.boolean({"a": "yes"}, "a", "tool.x")
    with pytest.raises(BadInput, match=r"must be a table, not an array"):
        shape.table([], "tool.x")
    with pytest.raises(BadInput, match=r"not an integer of 16610 bits"):  # too long for str(): never converted
        shape.string({"a": 10 ** 5000}, "a", "tool.x")


# -- sdists on every Python (3.11.0-3.11.3 have no data filter) -------------------------------------------


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "",
          mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname, info.mode = kind, size, link, mode
    return info


@pytest.mark.parametrize(("member", "says"), [
    (_info("../evil"), "outside the destination"),
    (_info("/etc/evil"), "absolute path"),
    (_info("p/link", tarfile.SYMTYPE, link="/etc/passwd"), "absolute path"),
    (_info("p/link", tarfile.SYMTYPE, link="../../x"), "points outside"),
    (_info("p/hard", tarfile.LNKTYPE, link="../x"), "points outside"),
    (_info("p/fifo", tarfile.FIFOTYPE), "special file"),
    (_info("p/dev", tarfile.CHRTYPE), "special file"),
])
def test_the_fallback_filter_refuses_what_the_data_filter_refuses(tmp_path: Path, member: tarfile.TarInfo,
                                                                  says: str) -> None:
    with pytest.raises(tarballs.UnsafeMember, match=says):
        tarballs.safe_member(member, str(tmp_path.resolve()))


def test_the_fallback_extracts_a_valid_sdist_without_setuid_bits(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _tar(tmp_path / "x-1.0.tar.gz", [(_info("x-1.0", tarfile.DIRTYPE, mode=0o755), b""),
                                               (_info("x-1.0/PKG-INFO", size=3, mode=0o4777), b"abc")])
    monkeypatch.setattr(tarballs, "HAS_DATA_FILTER", False)  # as on Python 3.11.2
    out = tmp_path / "out"
    out.mkdir()
    with tarfile.open(archive) as opened:
        tarballs.extract_all(opened, out)
    unpacked = out / "x-1.0" / "PKG-INFO"
    assert unpacked.read_bytes() == b"abc" and unpacked.stat().st_mode & 0o7022 == 0


@pytest.mark.parametrize("data_filter", [True, False])
def test_release_check_of_an_sdist_runs_with_and_without_the_data_filter(
        tmp_path: Path, data_filter: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    if data_filter and not tarballs.HAS_DATA_FILTER:
        pytest.skip("this Python (< 3.11.4) has no tarfile data filter")
    monkeypatch.setattr(tarballs, "HAS_DATA_FILTER", data_filter)  # False: as on Debian's python3 3.11.2
    sdist = tmp_path / "splitfam-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(SPLITFAM, "splitfam-0.1.0")
        pkg_info = (b"Metadata-Version: 2.1\nName: splitfam\nVersion: 0.1.0\n"
                    b"Requires-Dist: splitfam-core<=0.1.0,>=0.1.0\n")
        archive.addfile(_info("splitfam-0.1.0/PKG-INFO", size=len(pkg_info)), io.BytesIO(pkg_info))
    code, out, err = run(capsys, "release", "check", str(sdist), "--index-url", _empty_index(tmp_path))
    assert code in (0, 1) and "release check splitfam 0.1.0" in out, err  # the index lists nothing: 1
    assert "Traceback" not in err and "internal error" not in err


def test_ast_parse_of_a_nul_byte_is_caught_on_every_python() -> None:
    from jaxrel.gates import names

    with pytest.raises(SyntaxError):
        names.parse("x = 1\0\n")  # 3.11.0-3.11.3 raise ValueError here; names.parse turns it into SyntaxError


# -- ~/.pypirc --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "says"), [
    (b"repository = http://x/\n", "no section headers"),
    (b"[private]\nrepository = http://a/\nrepository = http://b/\n", "already exists"),
    (b"[private]\n[private]\n", "already exists"),
    ("[private]\nusername = j\u00f6rg\n".encode("latin-1"), "not UTF-8"),
])
def test_a_broken_pypirc_is_one_line_of_bad_input(tmp_path: Path, data: bytes, says: str) -> None:
    path = tmp_path / ".pypirc"
    path.write_bytes(data)
    with pytest.raises(BadInput, match=says) as info:
        read_pypirc(path)
    assert "\n" not in str(info.value) and ".pypirc" in str(info.value)


def test_pypirc_without_passwords_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / ".pypirc"
    path.write_text("[distutils]\nindex-servers = private\n[private]\nrepository = http://h/legacy/\n"
                    "username = u\npassword = s3cret\n")
    found = read_pypirc(path)
    assert found.repository("private") == "http://h/legacy/" and found.repository("other") is None
    assert "s3cret" not in found.without_passwords() and "username = u" in found.without_passwords()
    assert read_pypirc(tmp_path / "missing").sections == {}


# -- manifest.json ----------------------------------------------------------------------------------------

GOOD = {"schema": 1, "family": "splitfam", "version": "0.1.0", "tag": "v0.1.0", "commit": None, "artifacts": [
    {"file": "x-0.1.0-py3-none-any.whl", "distribution": "x", "version": "0.1.0", "role": "frontend",
     "kind": "wheel", "sha256": "0" * 64, "size": 1}]}


@pytest.mark.parametrize(("change", "says"), [
    (lambda m: m.update(version="banana"), "'version' must be a PEP 440 version"),
    (lambda m: m["artifacts"][0].update(version="0." + "9" * 5000), "PEP 440"),
    (lambda m: m["artifacts"][0].update(size="1"), "'size' must be a non-negative integer"),
    (lambda m: m["artifacts"][0].update(size=True), "'size' must be a non-negative integer"),
    (lambda m: m["artifacts"][0].update(kind="egg"), "'kind' must be"),
    (lambda m: m["artifacts"][0].update(file="../x.whl"), "a file name, not a path"),
    (lambda m: m["artifacts"][0].update(sha256=5), "'sha256' must be a non-empty string"),
    (lambda m: m.update(artifacts={"a": 1}), "must be an array"),
    (lambda m: m.update(artifacts=[[]]), r"\[artifacts\[0\]\] must be a table"),
    (lambda m: m.update(extra=1), "unknown key 'extra'"),
    (lambda m: m.update(schema=True), "schema"),
    (lambda m: m.update(family=None), "'family' must be a non-empty string"),
])
def test_a_wrong_manifest_field_is_named(change: object, says: str) -> None:
    import copy

    data = copy.deepcopy(GOOD)
    change(data)  # type: ignore[operator]
    with pytest.raises(manifest.ManifestError, match=says):
        manifest.parse(data, "dist/manifest.json")
    assert manifest.parse(GOOD, "m").artifacts[0].size == 1


# -- the frontend's dependencies: release check and bump --------------------------------------------------


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "splitfam"
    shutil.copytree(SPLITFAM, root)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "0.1.0")
    return root


def _digests(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and ".git" not in p.parts}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {DEADLINE} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(DEADLINE)
    try:
        code = main(list(argv))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return code, out, err


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


FRONTEND_DEPS = 'dependencies = ["splitfam-core>=0.1.0,<=0.1.0"]'
WRONG_STATES = {
    "a string": ('dependencies = "splitfam-core>=0.1.0,<=0.1.0"', "'dependencies' must be a list of requirement"),
    "the core twice": ('dependencies = ["splitfam-core>=0.1.0,<=0.1.0", "splitfam-core<1"]', "listed 2 times"),
    "an invalid marker": (FRONTEND_DEPS + '\n[project.optional-dependencies]\n'
                          'cpu = ["splitfam-cpu-plugin==0.1.0; python_version >> \'3\'"]',
                          "project.optional-dependencies.cpu"),
    "an invalid requirement": ('dependencies = ["splitfam-core>=0.1.0,<=0.1.0", "not a requirement!"]',
                               "is not a valid requirement"),
    "extras as an array": (FRONTEND_DEPS + '\noptional-dependencies = ["x"]', "must be a table"),
}


@pytest.mark.parametrize("state", sorted(WRONG_STATES))
def test_wrong_dependencies_are_bad_input_for_check_and_bump(repo: Path, state: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    line, says = WRONG_STATES[state]
    _edit(repo / "frontend" / "pyproject.toml", FRONTEND_DEPS, line)
    before = _digests(repo)
    for argv in (("release", "check", str(repo), "--index-url", _empty_index(tmp_path)),
                 ("release", "bump", "0.2.0", "--project", str(repo))):
        code, out, err = run(capsys, *argv)
        if state == "an invalid marker" and argv[1] == "bump":
            assert code == 0  # bump moves the core's range; the extras are release check's
            continue
        if state == "the core twice" and argv[1] == "check":  # a failed check (1) naming it, never a pass
            assert code == 1 and "2 unconditional requirements on splitfam-core" in out
            continue
        assert code == 2, (argv, code, err)
        assert says in err and "frontend/pyproject.toml" in err and err.count("\n") == 1, err
        assert "Traceback" not in err
        assert _digests(repo) == before  # nothing written


def test_a_symlinked_version_location_out_of_the_tree_is_refused(repo: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    version = repo / "core" / "splitfam_core" / "version.py"
    outside = repo.parent / "outside.py"
    outside.write_text(version.read_text())
    version.unlink()
    version.symlink_to(outside)
    code, _, err = run(capsys, "release", "bump", "0.2.0", "--project", str(repo))
    assert code == 2 and "leads outside" in err
    assert outside.read_text().count("0.1.0") and "0.2.0" not in outside.read_text()


# -- the frontend's version file ---------------------------------------------------------------------------


def test_a_version_file_climbing_out_of_the_tree_is_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    family = tmp_path / "family.toml"
    family.write_text('[tool.jaxrel]\nname = "f"\n[tool.jaxrel.frontend]\ndistribution = "f"\npackage = "f_core"\n'
                      'version-file = "f_core/../../../../etc/hostname"\nminimum-backend-variable = "_m"\n'
                      '[tool.jaxrel.backend]\ndistribution = "f-core-lib"\n')
    code, _, err = run(capsys, "gates", str(tmp_path), "--family", str(family))
    assert code == 2 and "'version-file'" in err and "must lie inside package" in err


def test_a_version_file_symlinked_out_of_the_tree_is_not_read(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree"
    (tree / "jax").mkdir(parents=True)
    secret = tmp_path / "secret.py"
    secret.write_text('_minimum_jaxlib_version = "0.4.30"\n')
    (tree / "jax" / "version.py").symlink_to(secret)
    (tree / "jax" / "a.py").write_text("x = 1\n")
    code, _, err = run(capsys, "gates", str(tree))
    assert code == 2 and "leads outside" in err and err.count("\n") == 1


# -- interpreters' answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [b"5", b"[1, 2, 3]", b'["a", "3.12.1", "x"]', b'["a", "banana", []]',
                                    b"\xff\xfe", b"[" * 100_000, b'["a", "3.12.1", [1]]', b""])
def test_an_interpreter_answer_of_the_wrong_shape_is_bad_input(answer: bytes) -> None:
    from jaxrel.distributions.installed import InterpreterError, parse_interpreter_answer

    with pytest.raises(InterpreterError, match="did not answer as a Python interpreter does"):
        parse_interpreter_answer(answer, "/x/python")
    assert parse_interpreter_answer(b'["/x", "3.12.1", ["", "/a"]]\n', "p") == ("/x", "3.12.1", ["/a"])


def test_the_interpreter_probe_accepts_only_a_version() -> None:
    from jaxrel.distributions.pythons import probe_answer

    assert probe_answer(b"3.12\n") == "3.12" and probe_answer(b"3.14t\n") == "3.14t"
    assert [probe_answer(b) for b in (b"\xff", b"3.12\n3.13", b"banana", b"", b"3." + b"9" * 5000, b"3.14tt",
                                      b"3.14T")] == [None] * 7


# -- hostile files through the command line -------------------------------------------------------------------


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    root = tmp_path / "h"
    root.mkdir()
    os.mkfifo(root / "fifo")
    (root / "deep.toml").write_text("[tool.jaxrel]\nprofile = 'jax'\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    (root / "digits.toml").write_text("[tool.jaxrel]\nname = 'x'\nn = " + "9" * 5000 + "\n")
    (root / "latin1.pypirc").write_bytes("[private]\nusername = j\u00f6rg\n".encode("latin-1"))
    (root / "nosection.pypirc").write_text("repository = http://127.0.0.1:9/\n")
    (root / "dup.pypirc").write_text("[private]\nrepository = http://a/\nrepository = http://b/\n")
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return root


def _cases(h: Path) -> Iterator[tuple[int, tuple[str, ...], dict[str, str]]]:
    gates_tree = str(REPO / "tests" / "data" / "gates_tree")
    for family in ("fifo", "deep.toml", "digits.toml"):
        yield 2, ("verdict", "jaxlib==0.12.0", "--family", str(h / family)), {}
        yield 2, ("gates", gates_tree, "--family", str(h / family)), {}
    for matrix in ("fifo", "deep.json"):
        yield 2, ("gates", gates_tree, "--matrix", str(h / matrix)), {}
    yield 2, ("xla", "show", "--workspace", str(h / "fifo")), {}
    yield 2, ("release", "plan", "--project", str(SPLITFAM), "--family", str(h / "fifo"), "--index-url",
              DEAD_INDEX), {}
    for name in ("latin1", "nosection", "dup", "fifo"):
        yield 2, ("release", "publish", str(h / "dist"), "--project", str(SPLITFAM), "--repository", "private",
                  "--dry-run"), {"HOME": str(h / f"home-{name}")}


def test_hostile_local_files_are_one_line_exit_2(hostile: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("latin1", "nosection", "dup", "fifo"):  # a HOME per ~/.pypirc
        (hostile / f"home-{name}").mkdir()
        if name == "fifo":
            os.mkfifo(hostile / "home-fifo" / ".pypirc")
        else:
            shutil.copy(hostile / f"{name}.pypirc", hostile / f"home-{name}" / ".pypirc")
    (hostile / "dist").mkdir()
    (hostile / "dist" / "x-0.1.0-py3-none-any.whl").write_bytes(b"x")
    manifest.Manifest("splitfam", "0.1.0", "v0.1.0", None, (manifest.Artifact(
        "x-0.1.0-py3-none-any.whl", "x", "0.1.0", "extension", "wheel",
        hashlib.sha256(b"x").hexdigest(), 1),)).write(hostile / "dist")
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    before = _digests(hostile) | _digests(SPLITFAM)
    failures = []
    for code, argv, env in _cases(hostile):
        with monkeypatch.context() as patched:
            for key, value in env.items():
                patched.setenv(key, value)
            found, out, err = run(capsys, *argv)
        lines = err.strip().splitlines()
        if found != code or len(lines) != 1 or "Traceback" in err or "internal error" in err:
            failures.append(f"{' '.join(argv)[:160]}: exit {found}, stderr {err[-300:]!r}")
    assert not failures, "\n".join(failures)
    assert _digests(hostile) | _digests(SPLITFAM) == before


# -- no raw parsing outside the boundary modules -------------------------------------------------------------

# Where raw JSON, TOML and INI may be parsed: the boundary modules, each turning bytes into typed
# values or one-line errors. Everything else gets its data from them.
BOUNDARIES = {
    "jaxrel/_util/localfiles.py": "every local file: TOML, JSON, INI (BadInput, exit 2)",
    "jaxrel/release/pypirc.py": "~/.pypirc (configparser only writes the copy without passwords)",
    "jaxrel/distributions/index.py": "index responses and jaxrel's index cache (EnvironmentFailure, exit 3)",
    "jaxrel/distributions/pages.py":
        "PEP 691 JSON and PEP 503 HTML index pages into typed files (EnvironmentFailure, exit 3)",
    "jaxrel/distributions/listcache.py": "jaxrel's cache of index listings (a damaged entry is a miss)",
    "jaxrel/release/attest.py": "PEP 740 attestation files and their statements (a mismatch is exit 1)",
    "jaxrel/release/auth.py": "the CI's and the index's answers in the trusted-publishing exchange (exit 3)",
    "jaxrel/distributions/urls.py": "URLs from anywhere",
    "jaxrel/distributions/wheels.py": "wheel and sdist METADATA / RECORD / WHEEL, the inspection cache",
    "jaxrel/distributions/pipconfig.py": "pip's configuration",
    "jaxrel/gates/find.py": "its subprocess entry reads the request jaxrel itself wrote (runs in another Python)",
}
RAW = {("json", "load"), ("json", "loads"), ("tomllib", "load"), ("tomllib", "loads")}


def _raw_parsing(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(
                node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in RAW:
            found.append(f"{node.func.value.id}.{node.func.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("json", "tomllib") and any(
                (node.module, alias.name) in RAW for alias in node.names):
            found.append(f"from {node.module} import ... (line {node.lineno})")
        elif isinstance(node, ast.Import | ast.ImportFrom) and "configparser" in (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]):
            found.append(f"configparser (line {node.lineno})")
    return found


def test_no_module_outside_the_boundaries_parses_raw_json_toml_or_ini() -> None:
    offenders = {}
    for path in sorted((REPO / "jaxrel").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative in BOUNDARIES or relative.startswith("jaxrel/cells/suite/"):  # runs in cell environments
            continue
        if found := _raw_parsing(path):
            offenders[relative] = found
    assert not offenders, f"parse through jaxrel._util.localfiles (or a boundary module): {offenders}"


def test_the_scan_sees_each_kind_of_raw_parsing(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import json, configparser\nfrom tomllib import loads\njson.loads('1')\n")
    assert len(_raw_parsing(sample)) == 3
    assert _raw_parsing(REPO / "jaxrel" / "_util" / "localfiles.py")  # the boundary itself does parse
