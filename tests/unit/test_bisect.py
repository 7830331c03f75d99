"""jaxrel bisect's parts that need no index: git in a private clone, what git bisect run concludes,
cells and options as the command line gives them, the report of a merge and of candidates."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from jaxrel.bisect import command, inputs, report, search
from jaxrel.bisect.git import Commit, Repo, locate, parse_outcome
from jaxrel.bisect.records import StepRecord
from jaxrel.cells.frontend import build_python, declared_requires_python
from jaxrel.cli import _common, main
from jaxrel.cli import bisect as cli_bisect
from jaxrel.errors import BadInput
from jaxrel.family import resolve_family


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": "1735689600 +0000", "GIT_COMMITTER_DATE": "1735689600 +0000"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Twelve commits of ``pkg/value.py`` (VALUE = 1..12) and a ``tests/`` file, in a subdirectory ``front``."""
    root = tmp_path / "user"
    (root / "front" / "pkg").mkdir(parents=True)
    (root / "front" / "tests").mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "u")
    _git(root, "config", "user.email", "u@example.invalid")
    (root / "front" / "setup.py").write_text("from setuptools import setup\nsetup(python_requires='>=3.99')\n")
    for number in range(1, 13):
        (root / "front" / "pkg" / "value.py").write_text(f"VALUE = {number}\n")
        (root / "front" / "tests" / "notes.txt").write_text(f"{number % 3}\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", f"value {number}")
    _git(root, "tag", "v1.0.0", "HEAD~11")
    _git(root, "tag", "front-v1.1.0", "HEAD~6")
    _git(root, "tag", "nightly", "HEAD~2")
    return root


def _state(root: Path) -> tuple[str, ...]:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=env).stdout

    return (run("status", "--porcelain", "--ignored"), run("for-each-ref"), run("rev-parse", "HEAD"),
            run("worktree", "list"), (root / ".git" / "index").read_bytes().hex())


STEP = """#!/bin/sh
v=$(git cat-file -p BISECT_HEAD:front/pkg/value.py | sed 's/VALUE = //')
case "$v" in 6|7) exit 125;; esac
[ "$v" -ge {first_bad} ] && exit 1
exit 0
"""


def _bisect(root: Path, tmp_path: Path, first_bad: int) -> tuple[Repo, str]:
    source = locate(root / "front")
    assert source.subdir == "front"
    clone = Repo.clone(source, tmp_path / "clone.git")
    head, first = _git(root, "rev-parse", "HEAD"), _git(root, "rev-parse", "HEAD~11")
    script = tmp_path / "step.sh"
    script.write_text(STEP.replace("{first_bad}", str(first_bad)))
    script.chmod(0o755)
    clone.start(head, [first])
    done = clone.run("bisect", "run", str(script), check=False)
    return clone, done.stdout


def test_git_bisect_in_the_private_clone_names_the_first_bad_commit_and_leaves_the_checkout_alone(
        repo: Path, tmp_path: Path) -> None:
    before = _state(repo)
    clone, output = _bisect(repo, tmp_path, 10)
    outcome = parse_outcome(output)
    assert outcome.first_bad == _git(repo, "rev-parse", "HEAD~2") and outcome.candidates == [outcome.first_bad]
    commit = clone.commit(outcome.first_bad, files=True)
    assert commit.subject == "value 10" and commit.files == ("front/pkg/value.py", "front/tests/notes.txt")
    assert commit.author == "u <u@example.invalid>" and commit.date.startswith("2025-01-01")
    assert _state(repo) == before
    assert subprocess.run(["git", "bisect", "log"], cwd=repo, capture_output=True).returncode != 0


def test_skipped_commits_leave_candidates(repo: Path, tmp_path: Path) -> None:
    _, output = _bisect(repo, tmp_path, 7)  # 6 and 7 are skipped: the first bad is 6, 7 or 8
    outcome = parse_outcome(output)
    assert outcome.first_bad is None
    assert sorted(outcome.candidates) == sorted(_git(repo, "rev-parse", f"HEAD~{12 - n}") for n in (6, 7, 8))


def test_exports_paths_and_keys_trees_by_content(repo: Path, tmp_path: Path) -> None:
    clone = Repo.clone(locate(repo / "front"), tmp_path / "clone.git")
    source = locate(repo / "front")
    paths = clone.paths("HEAD", source, ["pkg"])
    assert paths == ["front/pkg", "front/setup.py"]  # top-level files and the directories asked for
    clone.export("HEAD~3", paths, tmp_path / "out")
    assert (tmp_path / "out" / "front" / "pkg" / "value.py").read_text() == "VALUE = 9\n"
    assert not (tmp_path / "out" / "front" / "tests").exists()
    # tests/notes.txt cycles with period 3; pkg/ differs everywhere: keys follow the exported trees only
    assert clone.tree_key("HEAD", ["front/tests"]) == clone.tree_key("HEAD~3", ["front/tests"])
    assert clone.tree_key("HEAD", paths) != clone.tree_key("HEAD~3", paths)


def test_a_directory_outside_git_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(BadInput, match="not a git checkout"):
        locate(tmp_path)


def test_the_release_tag_is_the_newest_release_the_commit_contains(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    assert command.release_tag(repo / "front", "front", head) == "front-v1.1.0"  # named for the distribution
    assert command.release_tag(repo / "front", "other", _git(repo, "rev-parse", "HEAD~8")) == "v1.0.0"
    commands = command.suggested_commands(str(repo / "front"), "front", head,
                                                {"py3.12-core0.1.0": ["tests/a.py::t"]}, test_env=[("X", "1")])
    assert commands == [f"jaxrel bisect --frontend-src {repo / 'front'} --good front-v1.1.0 --bad {head} "
                        "--cell py3.12-core0.1.0 --env X=1 --frontend-tests tests/a.py::t"]
    assert command.suggested_commands("x", "front", None, {"c": ["t"]}) == []


@pytest.mark.parametrize(("request_args", "expected"), [
    ({"cell": "py3.12-jaxlib0.11.0"}, ("3.12", "0.11.0", None)),
    ({"cell": "py3.13-jaxlib0.11.1-cuda12"}, ("3.13", "0.11.1", "cuda12")),
    ({"backend": "0.10.2", "python": "3.12", "plugins": "tpu"}, ("3.12", "0.10.2", "tpu")),
])
def test_cells_from_the_command_line(request_args: dict[str, str], expected: tuple[str, ...]) -> None:
    request = search.Request(Path("."), ("a",), "b", Path("w"), **request_args)  # type: ignore[arg-type]
    assert inputs.cell_parts(request, resolve_family("jax")) == expected


@pytest.mark.parametrize("cell", ["jaxlib0.11.0", "py3.12-splitfam-core0.1.0", "py3.12-jaxlibnext"])
def test_a_malformed_cell_is_bad_input(cell: str) -> None:
    with pytest.raises(BadInput, match="jaxlib"):
        inputs.cell_parts(search.Request(Path("."), ("a",), "b", Path("w"), cell=cell), resolve_family("jax"))


def test_deps_as_of() -> None:
    request = search.Request(Path("."), ("a",), "b", Path("w"))
    assert inputs.exclude_newer(request, "2026-08-07T08:14:48-07:00") == "2026-08-07T15:14:48Z"
    now = search.Request(Path("."), ("a",), "b", Path("w"), deps_as_of="now")
    assert inputs.exclude_newer(now, "2026-08-07T08:14:48-07:00") is None
    with pytest.raises(BadInput, match="--deps-as-of 'yesterday'"):
        inputs.exclude_newer(search.Request(Path("."), ("a",), "b", Path("w"), deps_as_of="yesterday"), "")


def test_env_pairs() -> None:
    assert _common.env_pairs(["JAX_ENABLE_X64=1", "EMPTY=", "A=b=c"]) == (
        ("JAX_ENABLE_X64", "1"), ("EMPTY", ""), ("A", "b=c"))
    for bad in ("NOVALUE", "=1", "A B=1"):
        with pytest.raises(BadInput, match="expected KEY=VALUE"):
            _common.env_pairs([bad])


def test_good_report(tmp_path: Path) -> None:
    green = tmp_path / "green.json"
    green.write_text(json.dumps({"ok": True, "frontend": {"commit": "abc123", "dirty": False}}))
    assert cli_bisect.good_from_report(str(green)) == "abc123"
    red = tmp_path / "red.json"
    red.write_text(json.dumps({"ok": False, "frontend": {"commit": "abc123"}}))
    with pytest.raises(BadInput, match="not green"):
        cli_bisect.good_from_report(str(red))
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"ok": True}))
    with pytest.raises(BadInput, match="missing required key .commit."):
        cli_bisect.good_from_report(str(old))


def test_the_command_line_refuses_before_touching_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    assert main(["bisect", "--frontend-src", str(tmp_path), "--bad", "HEAD"]) == 2
    assert "give --good REV" in capsys.readouterr().err
    assert main(["bisect", "--frontend-src", str(tmp_path), "--good", "a", "--cell", "c", "--python", "3.12"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["bisect", "--frontend-src", str(tmp_path), "--good", "a", "--reruns", "-1"]) == 2
    assert "--reruns -1" in capsys.readouterr().err
    assert main(["bisect", "--frontend-src", str(tmp_path), "--good", "a", "--backend", "jaxlib==0.6.2", "--python",
                 "3.12", "--also-backend", "jax==0.7.0"]) == 2
    assert "--also-backend jax==0.7.0: the backend of jax is jaxlib" in capsys.readouterr().err


def test_another_backend_for_refusing_revisions_is_a_version(tmp_path: Path) -> None:
    """``--also-backend`` is bounded as the cell's own backend is: a malformed version is bad input before any clone."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for argv in (["init", "-q"], *[["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                    "-m", "x"]] * 2):
        subprocess.run(["git", *argv], cwd=repo, check=True)
    request = search.Request(source=repo, goods=("HEAD~1",), bad="HEAD", workdir=tmp_path / "w", backend="0.6.2",
                             python="3.12", tests=("tests/x_test.py",), more_backends=("0.7.0", "seven"))
    with pytest.raises(BadInput, match="--also-backend seven"):
        inputs.check_inputs(request, resolve_family("jax"))


def test_compat_suite_tests_as_the_selection_are_checked_before_anything_is_built(tmp_path: Path) -> None:
    """``--compat-tests``: a regression of jaxrel's own compat suite (no frontend test failed) is bisected with the
    suite's failing tests; a name the suite does not have, both selections at once, or a family whose APIs the
    suite does not test are refused before any clone."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for argv in (["init", "-q"], *[["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                    "-m", "x"]] * 2):
        subprocess.run(["git", *argv], cwd=repo, check=True)
    base = dict(source=repo, goods=("HEAD~1",), bad="HEAD", workdir=tmp_path / "w", backend="0.6.0", python="3.12")
    jax = resolve_family("jax")
    found = inputs.check_inputs(search.Request(**base, suite_tests=("test_api.py::test_api[jax.jit]",)), jax)
    assert found.tests == ()
    for extra, says in (({"suite_tests": ("test_nope.py::t",)}, "not a test of jaxrel's compat suite"),
                        ({"suite_tests": ("../x.py::t",)}, "not a test of jaxrel's compat suite"),
                        ({"suite_tests": ("test_api.py::t",), "tests": ("tests/a_test.py",)}, "not both")):
        with pytest.raises(BadInput, match=says):
            inputs.check_inputs(search.Request(**base, **extra), jax)  # type: ignore[arg-type]
    plain = replace(jax, compat_suite=False)
    with pytest.raises(BadInput, match="has none; pass --frontend-tests"):
        inputs.check_inputs(search.Request(**base, suite_tests=("test_api.py::t",)), plain)
    assert command.command("SRC", "cell", [], "good", "bad", suite_tests=["test_api.py::test_api[x y]"]).endswith(
        "--compat-tests 'test_api.py::test_api[x y]'")


def _commit(hash_: str, subject: str, parents: int = 1) -> Commit:
    return Commit(hash_ * 40, subject, "A <a@x>", "2025-01-01T00:00:00+00:00",
                  tuple(str(n) * 40 for n in range(parents)), ("jax/a.py",))


def test_the_report_says_a_merge_is_a_merge_and_lists_candidates(tmp_path: Path) -> None:
    bad = StepRecord("c" * 40, "Merge pull request #1", "bad", "1 failing: tests/a.py::t (ValueError: x)",
                     failing=["tests/a.py::t"], first_error="ValueError: x",
                     seconds={"export": 0.2, "build+install": 3.1, "tests": 2.0})
    good = StepRecord("0" * 40, "before", "good", "3 passed", role="parent")
    merge = search.Result("found", "py3.12-jaxlib0.11.0", "f" * 40, ["0" * 40], 7, _commit("c", "Merge #1", 2),
                          merge_brings=[_commit("d", "use the new API")], at_culprit=bad, at_parent=good,
                          steps=[bad, good], message="first bad commit")
    text = report.text(merge)
    assert "a merge: it brings in 1 commits:" in text and "dddddddddddd use the new API" in text
    assert "first error: ValueError: x" in text and "at its parent: good (3 passed)" in text
    assert "7 commits in range · 1 bisection steps" in text
    json_path, md_path = report.write(tmp_path, merge)
    data = json.loads(json_path.read_text())
    assert data["first_bad"]["merge"] is True and data["merge_brings"][0]["subject"] == "use the new API"
    assert "(a merge)" in md_path.read_text()
    several = search.Result("candidates", "cell", "f" * 40, ["0" * 40], 9,
                            candidates=[_commit("a", "one"), _commit("b", "two")])
    markdown = report.markdown(several)
    assert "## Candidates" in markdown and "- `aaaaaaaaaaaa` one" in markdown and "- `bbbbbbbbbbbb` two" in markdown


def test_a_tree_is_built_with_an_interpreter_its_requires_python_admits(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("setup(\n    python_requires='>=3.99',\n)\n")
    assert str(declared_requires_python(tmp_path)) == ">=3.99"
    with pytest.raises(BadInput, match="requires Python >=3.99; no such interpreter here"):
        build_python(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.8"\n')
    assert str(declared_requires_python(tmp_path)) == ">=3.8"  # pyproject.toml first
    import sys

    assert build_python(tmp_path) == sys.executable


def test_a_tree_needing_a_newer_python_builds_with_the_oldest_here_it_admits(tmp_path: Path) -> None:
    import subprocess
    import sys

    from jaxrel.distributions.pythons import find_pythons

    newer = [v for v in find_pythons() if tuple(map(int, v.split("."))) > sys.version_info[:2]]
    if not newer:
        pytest.skip("no interpreter here newer than the running one")
    for required, expected in ((f">={newer[0]}", newer[0]),
                               (f">={newer[0]},!={newer[0]}.*", newer[1] if len(newer) > 1 else None)):
        (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\nrequires-python = "{required}"\n')
        if expected is None:
            with pytest.raises(BadInput, match="no such interpreter here"):
                build_python(tmp_path)
            continue
        chosen = build_python(tmp_path)
        said = subprocess.run([chosen, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert said == expected, (required, chosen)


def test_compat_refuses_a_bad_env_or_a_good_without_a_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    assert main(["compat", "--env", "NOEQ", "--workdir", str(tmp_path)]) == 2
    assert "--env 'NOEQ': expected KEY=VALUE" in capsys.readouterr().err
    assert main(["compat", "--good", "HEAD", "--workdir", str(tmp_path)]) == 2
    assert "pass --frontend-src PATH" in capsys.readouterr().err


def test_env_reaches_every_suite_and_its_pytest_run(tmp_path: Path) -> None:
    import sys

    from jaxrel.cells import suites
    from jaxrel.cells.owntests import OwnTests
    from jaxrel.compat.options import Options
    from jaxrel.distributions.envs import Env

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_env.py").write_text(
        "import os\n\ndef test_flag():\n    assert os.environ.get('JAXREL_TEST_FLAG') == 'on'\n")
    own = suites.Suite("own tests", "own", tmp_path, ("tests",))
    options = Options(workdir=tmp_path / "w", suite=None, own=OwnTests(own, None),
                      test_env=(("JAXREL_TEST_FLAG", "on"),))
    (staged,) = options.suites()
    assert staged.env == (("JAXREL_TEST_FLAG", "on"),)
    env = Env(Path(sys.prefix))  # this interpreter's environment: pytest and jaxrel's cell plugin are there
    with_flag = suites.run_suite(env, staged, tmp_path / "run1", package="jaxrel")
    without = suites.run_suite(env, own, tmp_path / "run2", package="jaxrel")
    assert with_flag.outcomes["tests/test_env.py::test_flag"].outcome == "passed"
    assert without.outcomes["tests/test_env.py::test_flag"].outcome == "failed"


@pytest.mark.parametrize("data_filter", [True, False], ids=["python-with-data-filter", "python-3.11.2-path"])
def test_export_extracts_on_every_supported_python(data_filter: bool, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Bisect's export goes through the one safe extractor: on Pythons without ``tarfile``'s filters (Debian 12's
    3.11.2, where ``extractall(filter=…)`` raises) the same rules apply by hand. A repository's own symlink that
    points outside the exported folders and an executable script come out as they are in git."""
    from jaxrel._util import tarballs

    monkeypatch.setattr(tarballs, "HAS_DATA_FILTER", data_filter and tarballs.HAS_DATA_FILTER)
    work = tmp_path / "work"
    (work / "front" / "pkg").mkdir(parents=True)
    (work / "front" / "pkg" / "value.py").write_text("VALUE = 1\n")
    (work / "front" / "pkg" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (work / "front" / "pkg" / "run.sh").chmod(0o755)
    (work / "front" / "README").write_text("readme\n")
    (work / "front" / "pkg" / "readme").symlink_to("../README")
    (work / "front" / "setup.py").write_text("")
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "-c", "user.name=u", "-c", "user.email=u@example.invalid", "commit", "-q", "-m", "one")
    clone = Repo.clone(locate(work / "front"), tmp_path / "clone.git")
    out = tmp_path / "out"
    clone.export("HEAD", ["front/pkg"], out)
    assert (out / "front" / "pkg" / "value.py").read_text() == "VALUE = 1\n"
    assert os.readlink(out / "front" / "pkg" / "readme") == "../README"
    assert os.access(out / "front" / "pkg" / "run.sh", os.X_OK)
