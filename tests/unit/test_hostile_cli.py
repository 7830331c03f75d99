"""A standing fuzz test: hostile inputs through the CLI's entry point, in process.

For every case: the exit code is the one the table defines (0 done, 1 refused, 2 bad input, 3
the environment or an external service failed), stderr is exactly one line (0 and 1: the report
is on stdout) with no traceback and no "internal error", and the files the case could touch are
byte-for-byte unchanged. Network cases use an index on a closed loopback port, so nothing leaves
the machine; a case that hangs (a FIFO read) fails after a deadline instead of stalling the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_deadline import run_main

from jaxrel.cli import main

REPO = Path(__file__).resolve().parents[2]
DEAD_INDEX = "http://127.0.0.1:9/simple/"  # the discard port: connection refused at once
HUGE = "0." + "9" * 5000
DEADLINE = 60  # seconds a case may take: a hang is a failure
GATE = "from jax._src.lib import jaxlib_extension_version\nif jaxlib_extension_version >= 5:\n    y = 1\n"
TERMS = 50_000
BAD_VERSIONS = ["banana", "", " ", "1!0.4.30", HUGE, "0.4.30-", "0..4", "v", "0.4.30+", "0.4.30.devx", "∞",
                "0.4.30\x00", "0x10", "1.0 2.0", "==1.0"]


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    code: int
    env: tuple[tuple[str, str], ...] = ()
    says: tuple[str, ...] = ()  # stderr holds each of these (a warning naming a file)
    shows: str = ""  # stdout holds this (the rest of a tree was still scanned)

    def __str__(self) -> str:
        return " ".join(arg[:30] for arg in self.argv)[:120]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of hostile files, each named after what is wrong with it."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "not-utf8.toml").write_bytes(b'[tool.jaxrel]\nname = "x\xff"\n')
    (root / "tool-5.toml").write_text("tool = 5\n")
    (root / "jaxrel-5.toml").write_text("[tool]\njaxrel = 5\n")
    (root / "bad-toml.toml").write_text("[tool.jaxrel\nprofile = 'jax'\n")
    (root / "no-table.toml").write_text("[project]\nname = 'x'\n")
    (root / "bogus-profile.toml").write_text("[tool.jaxrel]\nprofile = 'bogus'\n")
    (root / "unknown-key.toml").write_text("[tool.jaxrel]\nprofile = 'jax'\ncolour = 'blue'\n")
    (root / "same-name.toml").write_text(
        "[tool.jaxrel]\nname = 'x'\n[tool.jaxrel.frontend]\ndistribution = 'x'\n[tool.jaxrel.backend]\n"
        "distribution = 'X'\n")
    (root / "epoch-minimum.toml").write_text(
        "[tool.jaxrel]\nname = 'x'\n[tool.jaxrel.frontend]\ndistribution = 'x'\nminimum-backend = '1!1.0'\n"
        "[tool.jaxrel.backend]\ndistribution = 'x-core'\n")
    (root / "a-directory").mkdir()
    (root / "text-file").write_text("not a program\n")
    (root / "not-python").write_text("#!/bin/sh\necho hello\n")
    (root / "not-python").chmod(0o755)
    for name, value in (("m-list.json", "[1, 2, 3]"), ("m-cells5.json", '{"cells": 5}'), ("m-null.json", "null"),
                        ("m-bad.json", "{"), ("m-strings.json", '{"cells": ["a", "b"]}')):
        (root / name).write_text(value)
    workspace = (REPO / "WORKSPACE").read_text()
    (root / "ws-banana").write_text(workspace.replace('backend_version = "0.10.2"', 'backend_version = "banana"'))
    call = workspace[workspace.index("xla_ffi(\n"):]
    call = call[: call.index("\n)\n") + 3]
    (root / "ws-two").write_text(workspace + "\n" + call)
    (root / "ws-none").write_text('workspace(name = "x")\n')
    (root / "ws-syntax").write_text("xla_ffi(\n")
    (root / "ws-not-utf8").write_bytes(b"\xff\xfe" + workspace.encode())
    (root / "ws-not-literal").write_text(workspace.replace('backend_version = "0.10.2"', "backend_version = V"))
    dist = root / "dist-null-sha"
    dist.mkdir()
    (dist / "manifest.json").write_text(json.dumps({"schema": 1, "family": "jax", "version": "0.1.0", "tag": "v0.1.0",
                                                    "artifacts": [{"file": "x-0.1.0-py3-none-any.whl",
                                                                   "distribution": "x", "version": "0.1.0",
                                                                   "role": "frontend", "kind": "wheel",
                                                                   "sha256": None, "size": 1}]}))
    bad = root / "dist-bad-json"
    bad.mkdir()
    (bad / "manifest.json").write_text("{")
    tampered = root / "dist-tampered"  # a file changed after the build: its sha256 is not the manifest's
    tampered.mkdir()
    (tampered / "x-0.1.0-py3-none-any.whl").write_bytes(b"not the bytes that were built")
    (tampered / "manifest.json").write_text(json.dumps({
        "schema": 1, "family": "jax", "version": "0.1.0", "tag": "v0.1.0", "artifacts": [
            {"file": "x-0.1.0-py3-none-any.whl", "distribution": "x", "version": "0.1.0", "role": "frontend",
             "kind": "wheel", "sha256": "0" * 64, "size": 29}]}))
    (root / "dist-list-json").mkdir()
    (root / "dist-list-json" / "manifest.json").write_text("[1]")
    (root / "dist-no-manifest").mkdir()
    (root / "dist-no-manifest" / "x-0.1.0-py3-none-any.whl").write_bytes(b"x")
    (root / ".pypirc").write_text("[distutils]\nindex-servers = private\n")
    (root / "a-file-not-a-dir").write_text("x")
    (root / "cache-file").write_text("not a directory")
    tree = root / "tree-no-version"
    (tree / "jax").mkdir(parents=True)
    (tree / "jax" / "x.py").write_text("x = 1\n")
    version = '_version = "0.5.0"\n_minimum_jaxlib_version = "0.4.30"\n'
    for name, files in (
        ("tree-fifo", {"version.py": version, "a.py": GATE, "pipe.py": None}),  # None: a FIFO
        ("tree-fifo-version", {"version.py": None, "a.py": GATE}),
        ("tree-deep", {"version.py": version, "a.py": GATE,
                       "sum.py": "x = " + " + ".join(["1"] * TERMS) + "\n" + GATE,
                       "wide.py": GATE.replace(">= 5:", ">= 5 and (" + " or ".join(["a"] * TERMS) + "):"),
                       "deep.py": GATE.replace("y = 1", "y = " + " + ".join(["1"] * TERMS))}),
    ):
        (root / name / "jax").mkdir(parents=True)
        for file, text in files.items():
            if text is None:
                os.mkfifo(root / name / "jax" / file)  # reading it waits for a writer forever
            else:
                (root / name / "jax" / file).write_text(text)
    _frontend_repository(root / "repo")
    for name, value in (("r-frontend-list.json", '{"ok": true, "frontend": []}'),
                        ("r-ok-word.json", '{"ok": "yes", "frontend": {"commit": "abcdef1"}}'),
                        ("r-commit-nul.json", '{"ok": true, "frontend": {"commit": "abc\\u0000def"}}'),
                        ("r-commit-int.json", '{"ok": true, "frontend": {"commit": 5}}'),
                        ("r-commit-option.json", '{"ok": true, "frontend": {"commit": "--output=/tmp/x"}}'),
                        ("r-list.json", "[1]"), ("r-red.json", '{"ok": false, "frontend": {"commit": "abcdef1"}}'),
                        ("m-backend-word.json",
                         '{"cells": [{"id": "c", "backend": "banana", "expected": "accepted"}]}'),
                        ("m-backend-huge.json", '{"cells": [{"id": "c", "backend": "' + HUGE + '", '
                                                '"expected": "accepted"}]}')):
        (root / name).write_text(value)
    (root / "user-workdir" / "repo.git").mkdir(parents=True)  # a user's own bare repository: never deleted
    (root / "user-workdir" / "repo.git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def _frontend_repository(path: Path) -> None:
    """A two-commit git repository (tags good, bad) with a tests/ directory: enough for bisect to check its
    input, which every case here fails before anything is cloned or built."""
    import subprocess

    (path / "tests").mkdir(parents=True)
    (path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"], ["tag", "good"],
                    ["commit", "-q", "--allow-empty", "-m", "two"], ["tag", "bad"]):
        subprocess.run(["git", *command], cwd=path, env=env, check=True, capture_output=True)


def cases(h: Path) -> list[Case]:
    found: list[Case] = []

    def add(code: int, *argv: str, env: dict[str, str] | None = None, says: tuple[str, ...] = (),
            shows: str = "") -> None:
        found.append(Case(tuple(argv), code, tuple((env or {}).items()), says, shows))

    # verdict: every malformed version in every role, and pins that do not make sense together
    for bad in BAD_VERSIONS:
        add(2, "verdict", f"jax=={bad}", "jaxlib==0.12.0")
        add(2, "verdict", "jax==0.12.0", f"jaxlib=={bad}")
        add(2, "verdict", "jax==0.12.0", "jaxlib==0.12.0", f"jax-cuda12-plugin=={bad}")
        add(2, "verdict", "jax==0.12.0", "jaxlib==0.12.0", "--min-backend", bad)
    for argv in (("jaxlib",), ("jaxlib=0.4",), ("==0.4",), ("jaxlib==",), ("jax==0.12.0",), ("torch==2.0", "jaxlib==1"),
                 ("jaxlib==0.12.0", "jaxlib==0.11.2"), ("jax==0.12.0", "jax==0.11.0", "jaxlib==0.11.2"),
                 ("jaxlib==0.12.0", "JAXLIB==0.12.0"), ("jaxlib==0.12.0", "jax_lib==0.12.0")):
        add(2, "verdict", *argv)
    add(1, "verdict", "jax==0.12.0", "jaxlib==0.12.0", "--min-backend", "0.13.0")
    add(1, "verdict", "jax==0.12.0", "jaxlib==0.12.0.1")
    # --family: every broken declaration, through three verbs
    families = ["not-utf8.toml", "tool-5.toml", "jaxrel-5.toml", "bad-toml.toml", "no-table.toml",
                "bogus-profile.toml", "unknown-key.toml", "same-name.toml", "epoch-minimum.toml", "a-directory",
                "missing.toml"]
    for name in families:
        add(2, "verdict", "jaxlib==0.12.0", "--family", str(h / name))
        add(2, "doctor", "--family", str(h / name))
        add(2, "gates", str(REPO / "tests" / "data" / "gates_tree"), "--family", str(h / name))
    add(2, "verdict", "jaxlib==0.12.0", "--family", "")
    # doctor --python: things that are not a Python interpreter
    for python in ("/bin/true", "/bin/false", str(h / "a-directory"), str(h / "text-file"), str(h / "not-python"),
                   str(h / "missing-python")):
        add(2, "doctor", "--python", python)
    # gates: a tree that is not one, a matrix of the wrong shape, a bad minimum
    gates_tree = str(REPO / "tests" / "data" / "gates_tree")
    add(2, "gates", str(h / "missing-tree"))
    add(2, "gates", str(h / "text-file"))
    add(2, "gates", str(h / "tree-no-version"))
    for bad in ("banana", "1!0.4", HUGE, "", "99.0"):
        add(2, "gates", gates_tree, "--min-backend", bad)
    for matrix in ("m-list.json", "m-cells5.json", "m-null.json", "m-bad.json", "m-strings.json", "missing.json"):
        add(2, "gates", gates_tree, "--matrix", str(h / matrix))
    # gates: a FIFO named like a module is skipped, not read (the rest is still scanned); 50,000 terms
    # are judged, or the file is named as not scanned / its rewrite refused, never a crash
    deep = "jax/deep.py not scanned: too deeply nested for Python's parser"
    for options, shows in (((), "jax/a.py:2: always-true"), (("--json",), '"file": "jax/a.py"'),
                           (("--diff",), "+++ b/jax/a.py")):
        add(0, "gates", str(h / "tree-fifo"), *options, shows=shows)
        add(0, "gates", str(h / "tree-deep"), *options, says=(deep,), shows=shows)
    add(0, "gates", str(h / "tree-deep"), "--diff", shows="+++ b/jax/a.py",
        says=("jax/sum.py:too deeply nested for Python's parser", "jax/wide.py:line 2 is nested more than 1000"))
    add(2, "gates", str(h / "tree-fifo-version"), says=("no _minimum_jaxlib_version",))
    add(0, "gates", str(h / "tree-fifo-version"), "--min-backend", "0.4.30", shows="jax/a.py:2: always-true")
    # xla: pins that cannot be read, or would be ambiguous
    for workspace in ("ws-banana", "ws-two", "ws-none", "ws-syntax", "ws-not-utf8", "ws-not-literal", "missing",
                      "a-directory"):
        add(2, "xla", "show", "--workspace", str(h / workspace))
        add(2, "xla", "pin", "--jaxlib", "0.12.0", "--workspace", str(h / workspace), "--index-url", DEAD_INDEX)
    for bad in ("banana", "1!0.4", HUGE):
        add(2, "xla", "pin", "--jaxlib", bad, "--workspace", str(REPO / "WORKSPACE"), "--index-url", DEAD_INDEX)
    add(3, "xla", "pin", "--jaxlib", "0.12.0", "--workspace", str(h / "ws-copy"), "--index-url", DEAD_INDEX)
    # build: options that cannot be split, an interpreter that is not here
    add(2, "build", "--bazel-options=--copt='-O2", "--workspace", str(h / "a-directory"))
    add(2, "build", '--bazel-options="', "--workspace", str(h / "a-directory"))
    # matrix / compat: bad options, an index that cannot be reached, a cache that is a file
    for verb in ("matrix", "compat"):
        add(2, verb, "--backends", "banana!!", "--index-url", DEAD_INDEX)
        # plugin families come from the frontend's extras, so the index is asked first: it fails (3)
        add(3, verb, "--plugins", "bogus", "--index-url", DEAD_INDEX)
        add(2, verb, "--wheelhouse", str(h / "missing-wheelhouse"), "--index-url", DEAD_INDEX)
        add(2, verb, "--frontend", "jax==0.12.0", "--frontend-src", str(h), "--index-url", DEAD_INDEX)
        add(2, verb, "--frontend-src", str(h / "a-directory"), "--index-url", DEAD_INDEX)
        add(3, verb, "--index-url", DEAD_INDEX, "--refresh", env={"JAXREL_CACHE_DIR": str(h / "cache-dir")})
        add(2, verb, "--index-url", DEAD_INDEX, env={"JAXREL_CACHE_DIR": str(h / "cache-file")})
    # release: manifests, URLs, outputs and versions that are wrong
    project = str(REPO / "tests" / "data" / "splitfam")
    # verify: a file that fails its check is refused (1); a manifest that cannot be read is bad input (2)
    add(1, "release", "verify", str(h / "dist-tampered"), "--project", project, shows="differs from the manifest")
    for dist in ("dist-bad-json", "dist-list-json", "dist-null-sha", "dist-no-manifest", "missing-dist"):
        add(2, "release", "verify", str(h / dist), "--project", project)
    # publish: verification first (1, 2: nothing uploaded); a repository that is not named right is usage (2)
    add(1, "release", "publish", str(h / "dist-tampered"), "--project", project, "--repository-url", DEAD_INDEX,
        shows="verification failed, nothing uploaded")
    for dist in ("dist-bad-json", "dist-list-json", "dist-null-sha", "dist-no-manifest"):
        add(2, "release", "publish", str(h / dist), "--project", project, "--repository-url", DEAD_INDEX,
            says=("manifest",))
    add(2, "release", "publish", str(h / "dist-tampered"), "--project", project, says=("exactly one of",))
    add(2, "release", "publish", str(h / "dist-tampered"), "--project", project, "--repository", "elsewhere",
        env={"HOME": str(h)}, says=("no repository 'elsewhere'",))
    add(2, "release", "publish", str(h / "dist-null-sha"), "--project", project, "--repository-url", "not a url")
    add(2, "release", "publish", str(h / "dist-null-sha"), "--project", project, "--repository-url", "ftp://x/")
    add(2, "release", "build", "--project", project, "--output", str(h / "a-file-not-a-dir"))
    for bad in ("banana", HUGE, "1!2.0"):
        add(2, "release", "bump", bad, "--project", project, "--dry-run")
    add(2, "release", "bump", "--project", project, "--dry-run")
    add(2, "release", "plan", "--project", str(h / "a-directory"), "--index-url", DEAD_INDEX)
    add(2, "release", "check", str(h / "text-file"), "--index-url", DEAD_INDEX)
    add(2, "release", "verify", "--project", str(h / "a-directory"))
    _newer_verb_cases(h, add, gates_tree)
    return found


def _newer_verb_cases(h: Path, add: Callable[..., None], gates_tree: str) -> None:
    # bisect: versions past Python's conversion limit, pythons that are not, reports of the wrong shape,
    # revisions that are options, test paths outside the tree, work directories that would hit user files
    repo = str(h / "repo")
    cell = ("--cell", "py3.12-jaxlib0.11.0")

    def bisect(code: int, *argv: str, env: dict[str, str] | None = None, says: tuple[str, ...] = ()) -> None:
        add(code, "bisect", "--frontend-src", repo, *argv, "--index-url", DEAD_INDEX, env=env, says=says)

    bisect(2, "--good", "good", "--bad", "bad", "--cell", "py3.12-jaxlib" + HUGE)
    bisect(2, "--good", "good", "--bad", "bad", "--backend", "jaxlib==" + HUGE, "--python", "3.12")
    bisect(2, "--good", "good", "--bad", "bad", "--backend", "jaxlib==0.11.0", "--python", "3.x")
    for report in ("r-frontend-list.json", "r-ok-word.json", "r-commit-nul.json", "r-commit-int.json",
                   "r-commit-option.json", "r-list.json", "r-red.json", "missing.json", "text-file"):
        bisect(2, "--good-report", str(h / report), "--bad", "bad", *cell)
    for rev in ("--output=/tmp/x", "HEAD\x00", "a b", "x" * 300):
        bisect(2, f"--good={rev}", "--bad", "bad", *cell)
        bisect(2, "--good", "good", f"--bad={rev}", *cell)
    for tests in ("/etc/passwd", "tests/../../../etc", "../x", "tests/\x00", "jax/tests"):
        bisect(2, "--good", "good", "--bad", "bad", *cell, "--frontend-tests", tests)
    bisect(2, "--good", "good", "--bad", "bad", *cell, "--frontend-tests", "/etc/passwd",
           env={"GIT_DIR": str(h / "missing"), "GIT_WORK_TREE": "/"})
    for workdir in (f"{repo}/build", f"{repo}/.git/x", str(h), str(h / "user-workdir"), str(h / "text-file")):
        bisect(2, "--good", "good", "--bad", "bad", *cell, "--frontend-tests", "tests", "--workdir", workdir,
               says=("--workdir",))
    # atlas and compat: the same bounds and work directories
    add(2, "atlas", "--frontends", HUGE, "--index-url", DEAD_INDEX)
    add(2, "atlas", "--frontends", "jax>>1", "--index-url", DEAD_INDEX)
    add(2, "atlas", "--python", "3.x", "--index-url", DEAD_INDEX)
    add(2, "atlas", "--python", "3." + "1" * 5000, "--index-url", DEAD_INDEX)
    add(2, "atlas", "--workdir", str(h / "user-workdir"), "--index-url", DEAD_INDEX, says=("--workdir",))
    for verb in ("matrix", "compat"):
        add(2, verb, "--backends", HUGE, "--index-url", DEAD_INDEX)
        for workdir in (f"{repo}/build", f"{repo}/.git", str(h / "user-workdir"), str(h)):
            add(2, verb, "--frontend-src", repo, "--workdir", workdir, "--index-url", DEAD_INDEX, says=("--workdir",))
    # gates --matrix: a cell whose backend is not a version
    for matrix in ("m-backend-word.json", "m-backend-huge.json"):
        add(2, "gates", gates_tree, "--matrix", str(h / matrix))




def _digests(root: Path) -> dict[str, str]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


PLACEHOLDER = Path("/HOSTILE")  # stands for the hostile directory until the test runs
CASES = cases(PLACEHOLDER)


def test_there_are_at_least_150_cases() -> None:
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c.argv[0]}" for i, c in enumerate(CASES)])
def test_hostile_input(case: Case, hostile: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def place(text: str) -> str:
        return text.replace(str(PLACEHOLDER), str(hostile))

    case = Case(tuple(place(a) for a in case.argv), case.code, tuple((k, place(v)) for k, v in case.env),
                case.says, case.shows)
    shutil.copy(REPO / "WORKSPACE", hostile / "ws-copy")
    (hostile / "cache-dir").mkdir(exist_ok=True)
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("JAXREL_DEBUG", raising=False)
    for key, value in case.env:
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    watched = {**_digests(hostile), **_digests(REPO / "tests" / "data"), str(REPO / "WORKSPACE"): hashlib.sha256(
        (REPO / "WORKSPACE").read_bytes()).hexdigest()}
    code = run_main(case.argv, DEADLINE)
    out, err = capsys.readouterr()
    assert code == case.code, f"{case}: exit {code}, expected {case.code}; stderr: {err[-500:]}"
    assert "Traceback" not in err and "internal error" not in err, f"{case}: {err[-500:]}"
    assert all(text in err for text in case.says), f"{case}: stderr does not say {case.says}: {err[-800:]}"
    assert case.shows in out, f"{case}: stdout does not show {case.shows!r}: {out[-800:]}"
    lines = [line for line in err.splitlines() if not line.startswith(("warning:", "listing ", "downloading "))
             and ": warning: " not in line]
    if case.code == 0:  # done: the report on stdout (gates --diff: what it rewrites and refuses on stderr)
        assert out and (len(lines) <= 1 or "--diff" in case.argv), f"{case}: {err[-800:]}"
    elif case.code == 1:  # a refusal is the verb's report on stdout; stderr says nothing more
        assert len(lines) <= 1 and out, f"{case}: {err[-800:]}"
    else:
        assert len(lines) == 1, f"{case}: stderr is not one line: {err[-800:]}"
        assert len(lines[0]) < 600, f"{case}: an unreadably long message ({len(lines[0])} characters)"
    after = {**_digests(hostile), **_digests(REPO / "tests" / "data"), str(REPO / "WORKSPACE"): hashlib.sha256(
        (REPO / "WORKSPACE").read_bytes()).hexdigest()}
    changed = [path for path in watched if watched[path] != after.get(path)]
    assert not changed, f"{case}: changed {changed}"


def _unwritable(path: Path) -> Callable[[], None]:
    """Make ``path`` unwritable even for root where the file system allows (chattr +i); the undo."""
    import subprocess

    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make {path.name} immutable here (chattr: {done.stderr.decode().strip()[:80]})")
    return lambda: subprocess.run(["chattr", "-i", str(path)], check=False)


def test_xla_pin_into_an_immutable_workspace_is_exit_3_and_leaves_it(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "WORKSPACE"
    shutil.copy(REPO / "WORKSPACE", workspace)
    before = workspace.read_bytes()
    undo = _unwritable(workspace)
    try:
        from jaxrel.extension import xla

        pin = xla.read_pin(workspace)
        moved = xla.XlaPin(**{**pin.to_json(), "backend_version": "0.12.0", "sha256": "a" * 64})
        with pytest.raises(OSError):
            xla.write_pin(workspace, moved)
    finally:
        undo()
    assert workspace.read_bytes() == before
    assert stat.S_ISREG(os.stat(workspace).st_mode)


# Hypothesis: versions and pins, well-formed or not, never crash `verdict`.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

release_numbers = st.lists(st.integers(0, 10**6), min_size=1, max_size=5).map(lambda p: ".".join(map(str, p)))
suffixes = st.sampled_from(["", "rc1", "a2", "b0", ".post3", ".dev20241119", "+gabc", ".dev1+local.7", "!", "-x"])
versions = st.one_of(
    st.builds(lambda r, s: r + s, release_numbers, suffixes),
    st.builds(lambda e, r: f"{e}!{r}", st.integers(0, 9), release_numbers),
    st.text(max_size=30),
)
names = st.sampled_from(["jax", "jaxlib", "jax-cuda12-plugin", "jax_cuda12_pjrt", "JAXLIB", "jax-rocm7-plugin",
                         "torch", ""])
pins = st.builds(lambda n, sep, v: f"{n}{sep}{v}", names, st.sampled_from(["==", "=", "", "==="]), versions)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=st.lists(pins, min_size=1, max_size=4), minimum=st.none() | versions)
def test_verdict_never_crashes_on_any_pins(argv: list[str], minimum: str | None,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    extra = [] if minimum is None else ["--min-backend", minimum]
    if any(a.startswith("-") for a in argv) or (minimum or "").startswith("-"):
        return  # an argument that looks like an option is argparse's business
    code = main(["verdict", *argv, *extra])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), err
    assert "Traceback" not in err and "internal error" not in err
    assert (code == 2) == bool(err.strip()) and err.count("\n") <= 1
    assert (code in (0, 1)) == bool(out)
