"""The frontend's own tests: what is selected, staged outside the tree, and run with jaxrel's cell plugin.

The plugin's tests run real pytest (this interpreter's) on a tiny test directory, so the record a
cell reads back (outcomes by node id, collection errors and their cause, shards, reruns, the
frontend's file) is what pytest really reports.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from jaxrel.cells import owntests, records, suites
from jaxrel.distributions import envs
from jaxrel.errors import BadInput
from jaxrel.family import jax_profile

JAX = jax_profile()
PLAIN = replace(JAX, frontend=replace(JAX.frontend, tests=(), test_requirements=None))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A jax-like source tree: the package, tests/, the build/ requirements, pytest options in pyproject.toml."""
    root = tmp_path / "jax-src"
    for path, text in {
        "jax/__init__.py": "", "tests/tree_util_test.py": "def test_a():\n    pass\n",
        "tests/testdata/x.txt": "data\n", "tests/__pycache__/old.pyc": "", "conftest.py": "# root conftest\n",
        "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '--import-mode=importlib'\n",
        "build/test-requirements.txt": "absl-py\n", "setup.py": "",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_explicit_paths_are_staged_with_the_pytest_configuration(tree: Path, tmp_path: Path) -> None:
    own, notes = owntests.plan(JAX, tree, owntests.Request(("tests/tree_util_test.py",), "tree"), tmp_path / "stage")
    assert own is not None and notes == []
    assert own.suite.root == tmp_path / "stage" and own.suite.paths == ("tests/tree_util_test.py",)
    assert own.suite.options == ("-k", "tree") and own.suite.parallel and own.suite.test_files == 1
    assert own.requirements == tree / "build" / "test-requirements.txt", "the family's declared file, in the tree"
    staged = sorted(p.relative_to(own.suite.root).as_posix() for p in own.suite.root.rglob("*") if p.is_file())
    assert staged == ["conftest.py", "pyproject.toml", "tests/testdata/x.txt", "tests/tree_util_test.py"]
    assert not (own.suite.root / "jax").exists(), "never the package: `import jax` must find the cell's wheel"


def test_a_node_id_is_checked_by_its_file_and_handed_to_pytest_whole(tree: Path, tmp_path: Path) -> None:
    """A test id copied from a failure (as bisect and history replay take it) selects that test alone."""
    (tree / "tests" / "tree_util_test.py").write_text("class TestTree:\n    def test_a(self):\n        pass\n\n"
                                                      "    def test_b(self):\n        assert False\n")
    node = "tests/tree_util_test.py::TestTree::test_a"
    own, notes = owntests.plan(PLAIN, tree, owntests.Request((node,)), tmp_path / "stage")
    assert own is not None and notes == [] and own.suite.paths == (node,) and own.suite.test_files == 1
    assert (own.suite.root / "tests" / "tree_util_test.py").is_file()
    done = suites.run_suite(ThisPython(tmp_path / "env"), own.suite, tmp_path / "work", package="jax")
    assert {test: o.outcome for test, o in done.outcomes.items()} == {node: "passed"}, done.output
    with pytest.raises(BadInput, match="--frontend-tests tests/gone_test.py::T::test_x: tests/gone_test.py is not in "
                                       "the frontend's source tree"):
        owntests.plan(PLAIN, tree, owntests.Request(("tests/gone_test.py::T::test_x",)), tmp_path / "stage")


def test_the_default_selection_is_the_familys(tree: Path, tmp_path: Path) -> None:
    own, notes = owntests.plan(JAX, tree, owntests.Request(), tmp_path / "stage")
    assert own is not None and own.suite.paths == ("tests/tree_util_test.py",), "-k alone narrows the default"
    assert notes == ["own tests: tests/api_util_test.py, tests/util_test.py, tests/config_test.py and 8 more of the "
                     "default selection not in the source; running the rest"]
    own, _ = owntests.plan(PLAIN, tree, owntests.Request(keyword="a"), tmp_path / "stage")
    assert own is not None and own.suite.paths == ("tests",) and own.requirements is None
    assert own.suite.test_files == 1, "tests/tree_util_test.py; not conftest.py or testdata"


def test_nothing_to_run(tree: Path, tmp_path: Path) -> None:
    assert owntests.plan(JAX, tree, owntests.Request(enabled=False), tmp_path / "s") == (None, [])
    assert owntests.plan(JAX, None, owntests.Request(), tmp_path / "s") == (None, []), "a released wheel"
    (tree / "tests" / "tree_util_test.py").unlink()
    own, notes = owntests.plan(JAX, tree, owntests.Request(), tmp_path / "s")
    assert own is None and notes == ["own tests: tests/tree_util_test.py, tests/api_util_test.py, tests/util_test.py "
                                     "and 9 more of the default selection not in the source (an sdist without "
                                     "tests?); none run"]


def test_the_requirements_override_and_a_missing_declared_file(tree: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("pytest\n")
    own, _ = owntests.plan(JAX, tree, owntests.Request(requirements=mine), tmp_path / "s")
    assert own is not None and own.requirements == mine
    (tree / "build" / "test-requirements.txt").unlink()
    own, notes = owntests.plan(JAX, tree, owntests.Request(), tmp_path / "s")
    assert own is not None and own.requirements is None
    assert "the declared test requirements build/test-requirements.txt are not in the source" in notes[-1]


@pytest.mark.parametrize(("request_", "message"), [
    (owntests.Request(("tests/nope_test.py",)),
     "--frontend-tests tests/nope_test.py: tests/nope_test.py is not in the frontend's source"),
    (owntests.Request(("jax/__init__.py",)), "tests inside the jax package would be imported with it"),
    (owntests.Request(requirements=Path("/nonexistent/reqs.txt")), "--test-requirements /nonexistent/reqs.txt: no"),
])
def test_bad_requests(tree: Path, tmp_path: Path, request_: owntests.Request, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        owntests.plan(JAX, tree, request_, tmp_path / "s")


def test_asking_for_own_tests_of_a_released_wheel(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="the frontend's own tests need its source"):
        owntests.plan(JAX, None, owntests.Request(keyword="jit"), tmp_path / "s")


# -- the cell plugin, in real pytest runs -----------------------------------------------------------

TESTS = {
    "tests/test_one.py": "import fake_frontend\n\ndef test_pass():\n    pass\n\n"
                         "def test_fail():\n    assert 1 == 2, 'one is not two'\n\n"
                         "def test_skip():\n    import pytest\n    pytest.skip('no GPU')\n",
    "tests/test_two.py": "import fake_frontend\nimport pytest\n\n@pytest.fixture\ndef broken():\n"
                         "    raise RuntimeError('fixture broke')\n\ndef test_setup_error(broken):\n    pass\n\n"
                         "def test_pass():\n    pass\n",
    "tests/test_missing.py": "import absl_not_installed\n\ndef test_never():\n    pass\n",
    "tests/fake_frontend/__init__.py": "",  # importable through the directory pytest puts on sys.path
}


@dataclass(frozen=True)
class ThisPython(envs.Env):
    """An "environment" whose interpreter is this one (which has pytest and jaxrel)."""

    @property
    def python(self) -> Path:
        return Path(sys.executable)


@pytest.fixture
def suite(tmp_path: Path) -> suites.Suite:
    for path, text in TESTS.items():
        (tmp_path / "staged" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "staged" / path).write_text(text)
    return suites.Suite("own tests", "own", tmp_path / "staged", ("tests",))


def run(suite: suites.Suite, **options: Any) -> suites.SuiteRun:
    return suites.run_suite(ThisPython(suite.root.parent / "env"), suite, suite.root.parent / "work",
                            package="fake_frontend", **options)


def test_the_plugin_records_outcomes_causes_and_the_frontends_file(suite: suites.Suite) -> None:
    junit = suite.root.parent / "junit" / "cell.xml"
    done = run(suite, junit=junit)
    assert done.recorded and done.returncode == 1 and junit.is_file()
    assert done.frontend_files == [str(suite.root / "tests" / "fake_frontend" / "__init__.py")]
    assert {test: (o.outcome, o.message) for test, o in done.outcomes.items()} == {
        "tests/test_one.py::test_pass": ("passed", ""),
        "tests/test_one.py::test_fail": ("failed", "AssertionError: one is not two"),
        "tests/test_one.py::test_skip": ("skipped", "no GPU"),
        "tests/test_two.py::test_setup_error": ("error", "RuntimeError: fixture broke"),
        "tests/test_two.py::test_pass": ("passed", ""),
        "tests/test_missing.py": ("error", "collection: ModuleNotFoundError: No module named 'absl_not_installed'"),
    }, "a collection error does not stop the other modules"
    assert done.counts() == suites.TestCounts(passed=2, failed=1, skipped=1, errors=2)
    assert done.passed("tests/test_one.py::test_pass") and not done.passed("tests/test_one.py")
    assert done.passed("tests/test_two.py::test_pass") and not done.passed("tests/test_missing.py")


def test_the_plugin_reruns_only_the_tests_asked_for(suite: suites.Suite) -> None:
    done = run(suite, only=["tests/test_one.py::test_fail", "tests/test_two.py"])
    assert sorted(done.outcomes) == ["tests/test_one.py::test_fail", "tests/test_two.py::test_pass",
                                     "tests/test_two.py::test_setup_error"], "a module's node id selects all of it"


def test_shards_split_the_tests_between_them(suite: suites.Suite) -> None:
    (suite.root / "tests" / "test_missing.py").unlink()
    first, second = (set(run(suite, shard=f"{i}/2").outcomes) for i in (1, 2))
    assert first and second and not first & second
    assert first | second == {f"tests/test_one.py::test_{name}" for name in ("pass", "fail", "skip")} | {
        "tests/test_two.py::test_setup_error", "tests/test_two.py::test_pass"}


def test_parse_shard() -> None:
    assert records.parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "x", "1/0"):
        with pytest.raises(ValueError):
            records.parse_shard(bad)


def test_first_error() -> None:
    text = "def test():\n>   assert f()\nE   AssertionError: first\nE   assert 1 == 2\n\nfile.py:3: AssertionError\n"
    assert records.first_error(text) == "AssertionError: first"
    assert records.first_error("ImportError while importing\nE   ModuleNotFoundError: x\n") == \
        "ModuleNotFoundError: x"
    assert records.first_error("just a line\n") == "just a line" and records.first_error("") == ""
    assert json.dumps(records.first_error("E " + "x" * 900)).count("x") == 500
