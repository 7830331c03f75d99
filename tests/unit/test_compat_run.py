"""The compat runner and its report, offline.

A fake environment stands in for ``envs.create``: its ``run`` answers the guard probe, the
import probe and pytest with canned output (pytest also writes its junit XML), so every
branch of a cell, the whole run and the report are covered without an index or real wheels.
One test runs the real probes, with this interpreter, against a fake site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import jaxrel
from jaxrel import doctor
from jaxrel._util import atomic
from jaxrel.compat import envs, report, runner
from jaxrel.compat.frontend import CompatError, PreparedFrontend
from jaxrel.compat.index import IndexClientError
from jaxrel.compat.matrix import Cell, FrontendSpec, Matrix
from jaxrel.compat.pythons import Python
from jaxrel.compat.wheels import ArtifactInfo
from jaxrel.extension import bazel
from jaxrel.family import jax_profile

FAMILY = jax_profile()
SPEC = FrontendSpec("jax", "0.10.2", "0.10.1", "wheel jax-0.10.2-py3-none-any.whl", ">=0.10.1,<=0.10.2", ">=3.11")
FIX = 'pip install "jaxlib>=0.10.1,<=0.10.2"'
ADMITTED = Cell("py3.11-jaxlib0.10.2", "3.11", "0.10.2", (), "admitted", "accepted")
PLUGINS = Cell("py3.11-jaxlib0.10.2-cuda12", "3.11", "0.10.2",
               (("jax-cuda12-plugin", "0.10.2"), ("jax-cuda12-pjrt", "0.10.2")), "plugins", "accepted")
BELOW = Cell("py3.11-jaxlib0.10.0", "3.11", "0.10.0", (), "below-minimum", "refused",
             ("backend-at-least-minimum",), FIX)
NEWER = Cell("py3.12-jaxlib0.10.3", "3.12", "0.10.3", (), "newer-than-frontend", "refused",
             ("backend-not-newer-than-frontend",), FIX)

ACCEPTED = json.dumps({"accepted": True})
REFUSED = json.dumps({"accepted": False, "message": f"jaxlib is version 0.10.0; jax 0.10.2 needs 0.10.1 <= jaxlib "
                                                    f"<= 0.10.2.\nFix: {FIX}", "fix": FIX})
IMPORTED = json.dumps({"version": "0.10.2", "sum": 3.0, "devices": ["TFRT_CPU_0"], "warnings": []})
PASSING = [("test_ffi", "test_call", "passed"), ("test_extension", "test_rmsnorm", "passed"),
           ("test_plugins", "test_cuda", "skipped: no GPU | none found")]
REAL_INSPECT: Callable[..., doctor.Environment] = doctor.read_environment  # before the harness replaces it
PYTEST_FAILED = ("..F.E\n\n=== short test summary info ===\nFAILED test_ffi.py::test_call - assert 1 == 2\n"
                 "ERROR test_shard_map.py::test_mesh - RuntimeError\n\n1 failed, 2 passed, 1 error in 0.52s\n")


def completed(args: tuple[str, ...], returncode: int, stdout: str = "", stderr: str = "") -> \
        subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(list(args), returncode, stdout, stderr)


def write_junit(path: Path, cases: list[tuple[str, str, str]]) -> None:
    """A junit XML file as pytest writes it: ``(classname, name, outcome)`` per test case."""
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(root, "testsuite", name="pytest")
    for classname, name, outcome in cases:
        case = ElementTree.SubElement(suite, "testcase", classname=classname, name=name)
        if outcome in ("failed", "error"):
            ElementTree.SubElement(case, "failure" if outcome == "failed" else "error", message="boom")
        elif outcome.startswith("skipped"):
            ElementTree.SubElement(case, "skipped", message=outcome.split(":", 1)[1].strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


@dataclass
class Script:
    """What the fake environment answers: ``(returncode, stdout, stderr)`` per probe, junit cases per pytest run."""

    guard: tuple[int, str, str] = (0, ACCEPTED + "\n", "")
    probe: tuple[int, str, str] = (0, IMPORTED + "\n", "")
    suite: tuple[int, str] = (0, "...s\n3 passed, 1 skipped in 0.1s\n")
    cases: list[tuple[str, str, str]] = field(default_factory=lambda: list(PASSING))
    own: tuple[int, str] = (0, "2 passed in 0.1s\n")
    own_cases: list[tuple[str, str, str]] = field(default_factory=lambda: [("tests.api_test", "test_jit", "passed")])
    site: list[str] | None = None  # run the two probes for real, with this sys.path


@dataclass(frozen=True)
class FakeEnv(envs.Env):
    script: Script = field(default_factory=Script)
    calls: list[tuple[tuple[str, ...], str | None]] = field(default_factory=list)

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
            cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append((args, cwd))
        if args[1] == "-c":
            if self.script.site is not None:
                path = os.pathsep.join([*self.script.site, str(Path(jaxrel.__file__).parents[1])])
                return subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=timeout,
                                      env={**os.environ, "PYTHONPATH": path, "JAXREL_SKIP_GUARD": ""})
            return completed(args, *(self.script.guard if args[2] == runner.GUARD_PROBE else self.script.probe))
        assert args[1:3] == ("-m", "pytest"), args
        own = cwd is not None
        write_junit(Path(args[args.index("--junitxml") + 1]), self.script.own_cases if own else self.script.cases)
        return completed(args, *(self.script.own if own else self.script.suite))


@dataclass
class Harness:
    """The runner's world: the environments it created, the scripts they follow, what it reported."""

    workdir: Path
    front: PreparedFrontend
    scripts: dict[str, Script] = field(default_factory=dict)
    failures: dict[str, Exception] = field(default_factory=dict)  # cell id -> what envs.create raises
    created: dict[str, dict[str, Any]] = field(default_factory=dict)
    envs: dict[str, FakeEnv] = field(default_factory=dict)
    progress: list[str] = field(default_factory=list)

    def options(self, **changes: Any) -> runner.Options:
        return runner.Options(**{"workdir": self.workdir, "extensions": False, "progress": self.progress.append,
                                 **changes})

    def run_cell(self, cell: Cell, extensions: list[Path] | str | None = None, **changes: Any) -> runner.CellResult:
        for wheel in [self.front.wheel, self.workdir / "jaxrel-0.1-py3-none-any.whl",
                      *(extensions if isinstance(extensions, list) else [])]:
            assert wheel is not None
            wheel.parent.mkdir(parents=True, exist_ok=True)
            wheel.write_bytes(wheel.name.encode())  # the runner records each installed file's sha256
        return runner.run_cell(cell, FAMILY, self.front, self.workdir / "jaxrel-0.1-py3-none-any.whl",
                               self.options(**changes), extensions)

    def junit(self, cell: Cell) -> ElementTree.Element:
        return ElementTree.parse(self.workdir / "junit" / f"{cell.id}.xml").getroot()

    def pytest_runs(self, cell: Cell) -> list[tuple[tuple[str, ...], str | None]]:
        return [call for call in self.envs[cell.id].calls if call[0][1:3] == ("-m", "pytest")]


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    info = ArtifactInfo("jax-0.10.2-py3-none-any.whl", "0" * 64, "jax", "0.10.2", "wheel",
                        requires_dist=["jaxlib<=0.10.2,>=0.10.1", "numpy>=1.26", "opt_einsum",
                                       "jax-cuda12-plugin==0.10.2; extra == 'cuda12'"])
    front = PreparedFrontend(SPEC, tmp_path / "dist" / info.filename, info)
    assert front.wheel is not None
    front.wheel.parent.mkdir(parents=True)
    front.wheel.write_bytes(b"a frontend wheel")
    world = Harness(tmp_path / "work", front)

    def create(root: Path, **kwargs: Any) -> envs.Env:
        cell = root.name
        world.created[cell] = kwargs
        if cell in world.failures:
            raise world.failures[cell]
        world.envs[cell] = FakeEnv(root, world.scripts.get(cell, Script()))
        return world.envs[cell]

    def inspect(family: Any, python: str | None = None, path: list[str] | None = None) -> doctor.Environment:
        assert python is not None and python.endswith("bin/python")
        return doctor.Environment(python, "3.11.7", api_numbers={"jaxlib_extension_version": 467,
                                                                  "ifrt_version": None}, xla_ffi_api="0.3")

    monkeypatch.setattr(envs, "create", create)
    monkeypatch.setattr(runner, "python_for", lambda version: Python(version, sys.executable))
    monkeypatch.setattr(doctor, "read_environment", inspect)
    return world


# -- one cell ---------------------------------------------------------------------------------------


def test_an_accepted_positive_cell_with_a_passing_suite_is_ok(harness: Harness) -> None:
    wheel = harness.workdir / "extensions" / "rmsnorm-0.1-cp311-cp311-linux_x86_64.whl"
    result = harness.run_cell(PLUGINS, [wheel])
    assert result.ok and result.observed == "accepted" and result.problems == []
    assert (result.tests.passed, result.tests.failed, result.tests.skipped, result.tests.errors) == (2, 0, 1, 0)
    assert result.outcomes == {"test_ffi::test_call": "passed", "test_extension::test_rmsnorm": "passed",
                               "test_plugins::test_cuda": "skipped: no GPU | none found"}
    assert result.frontend_import == json.loads(IMPORTED) and result.import_error is None
    assert result.backend_api == {"jaxlib_extension_version": 467, "ifrt_version": None, "xla_ffi_api": "0.3"}
    assert result.extension == wheel.name and result.seconds > 0
    # what the environment was made of: the backend and the frontend's plain requirements, then --no-deps
    created = harness.created[PLUGINS.id]
    assert created["python"] == sys.executable
    assert created["requirements"] == ["jaxlib==0.10.2", "numpy>=1.26", "opt_einsum", "pytest"]
    assert created["no_deps"] == [str(harness.front.wheel), str(harness.workdir / "jaxrel-0.1-py3-none-any.whl"),
                                  "jax-cuda12-plugin==0.10.2", "jax-cuda12-pjrt==0.10.2", str(wheel)]
    # the guard is called as the frontend calls it, then the import probe, then the compat suite
    calls = [args for args, _ in harness.envs[PLUGINS.id].calls]
    assert [args[1:3] for args in calls] == [("-c", runner.GUARD_PROBE), ("-c", calls[1][2]), ("-m", "pytest")]
    arguments = json.loads(calls[0][3])
    assert arguments["frontend_version"] == "0.10.2" and arguments["minimum_backend"] == "0.10.1"
    assert ["jax-cuda12-plugin", True] in arguments["plugins"]
    assert "import jax as frontend" in calls[1][2]
    assert calls[2][3] == str(runner.DEFAULT_SUITE) and "--junitxml" in calls[2]
    # the junit file is pytest's own
    assert len(harness.junit(PLUGINS).findall(".//testcase")) == 3


def test_a_failing_suite_fails_the_cell_with_the_output_tail(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(suite=(1, PYTEST_FAILED),
                                          cases=[*PASSING[:2], ("test_ffi", "test_bad", "failed"),
                                                 ("test_shard_map", "test_mesh", "error")])
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.observed == "accepted"
    assert (result.tests.passed, result.tests.failed, result.tests.errors) == (2, 1, 1)
    assert result.outcomes["test_ffi::test_bad"] == "failed" and result.outcomes["test_shard_map::test_mesh"] == "error"
    assert result.problems == [
        "compat suite: 1 failed, 1 errors (FAILED test_ffi.py::test_call - assert 1 == 2 | "
        "ERROR test_shard_map.py::test_mesh - RuntimeError | 1 failed, 2 passed, 1 error in 0.52s)"]
    assert result.extension is None


def test_a_suite_that_crashes_without_junit_fails_too(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(suite=(4, "ERROR: usage: pytest [options]\n"), cases=[])
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.tests == runner.TestCounts()
    assert result.problems == ["compat suite: 0 failed, 0 errors (ERROR: usage: pytest [options])"]


def test_no_tests_collected_is_not_a_failure(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(suite=(5, "no tests ran in 0.01s\n"), cases=[])
    assert harness.run_cell(ADMITTED, keyword="nothing").ok


def test_an_import_failure_in_an_accepted_cell_is_a_problem(harness: Harness) -> None:
    traceback = "Traceback (most recent call last):\n  File \"<string>\", line 5\nImportError: jaxlib too old\n\n"
    harness.scripts[ADMITTED.id] = Script(probe=(1, "", traceback))
    result = harness.run_cell(ADMITTED)
    assert result.import_error == "ImportError: jaxlib too old" and result.frontend_import is None
    assert result.problems == ["import failed: ImportError: jaxlib too old"] and not result.ok
    assert result.tests.passed == 2, "the suite still runs, for the outcomes table"


def test_a_negative_cell_refused_with_a_pip_fix_is_ok(harness: Harness) -> None:
    harness.scripts[BELOW.id] = Script(guard=(0, REFUSED + "\n", ""), probe=(1, "", "ImportError: no\n"))
    result = harness.run_cell(BELOW, "not requested (--no-extension)")
    assert result.ok and result.observed == "refused" and result.problems == []
    assert result.guard_fix == FIX and "0.10.1 <= jaxlib" in str(result.guard_message)
    assert result.import_error == "ImportError: no", "real jax refusing too is recorded"
    assert result.extension == "not requested (--no-extension)"
    assert harness.pytest_runs(BELOW) == [], "no suite on a refused cell"
    assert harness.created[BELOW.id]["requirements"][0] == "jaxlib==0.10.0"
    (case,) = harness.junit(BELOW).iter("testcase")
    assert case.get("name") == "guard_below-minimum" and case.get("classname") == f"compat.{BELOW.id}"
    assert case.find("failure") is None


def test_a_refusal_without_a_pip_fix_fails_the_cell(harness: Harness) -> None:
    refusal = json.dumps({"accepted": False, "message": "jaxlib too old; pip users upgrade it",
                          "fix": "conda install jaxlib=0.10.2"})
    harness.scripts[BELOW.id] = Script(guard=(0, "a warning first\n" + refusal + "\n", ""))
    result = harness.run_cell(BELOW)
    assert not result.ok and result.observed == "refused"
    assert result.problems == ["refused without a pip fix command: jaxlib too old; pip users upgrade it"]
    failure = harness.junit(BELOW).find(".//failure")
    assert failure is not None and failure.get("message") == result.problems[0]


def test_a_negative_cell_the_guard_accepts_is_the_wrong_verdict(harness: Harness) -> None:
    result = harness.run_cell(NEWER)
    assert not result.ok and result.observed == "accepted"
    assert result.problems == ["expected refused, the guard accepted it"]
    assert harness.pytest_runs(NEWER) == []
    failure = harness.junit(NEWER).find(".//failure")
    assert failure is not None and failure.get("message") == "expected refused, the guard accepted it"


def test_a_positive_cell_the_guard_refuses_is_the_wrong_verdict(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(guard=(0, REFUSED, ""))
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.observed == "refused"
    assert result.problems[0].startswith("expected accepted, the guard refused it: jaxlib is version 0.10.0")
    assert harness.pytest_runs(ADMITTED) == []


def test_a_guard_crash_fails_the_cell_with_its_last_line(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(guard=(1, "", "Traceback (most recent call last):\n"
                                                        "ModuleNotFoundError: No module named 'jaxrel'\n\n"))
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.observed == "guard-error"
    assert result.problems == ["the guard crashed: ModuleNotFoundError: No module named 'jaxrel'"]
    assert [args[1] for args, _ in harness.envs[ADMITTED.id].calls] == ["-c"], "nothing runs after the crash"
    failure = harness.junit(ADMITTED).find(".//failure")
    assert failure is not None and failure.get("message") == result.problems[0]


@pytest.mark.parametrize("stdout", ["", "not json\n", "[1, 2]\n"])
def test_a_guard_probe_that_exits_0_without_its_json_is_a_guard_error(harness: Harness, stdout: str) -> None:
    harness.scripts[ADMITTED.id] = Script(guard=(0, stdout, "something odd\n"))
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.observed == "guard-error"
    assert result.problems == ["the guard crashed: something odd"]


def test_a_guard_crash_without_output_says_so(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(guard=(-9, "", ""))
    assert harness.run_cell(ADMITTED).problems == ["the guard crashed: no output"]


def test_an_install_failure_fails_the_cell(harness: Harness) -> None:
    harness.failures[ADMITTED.id] = envs.EnvError("installing jaxlib==0.10.2 failed (exit 1): no matching wheel")
    stale = harness.workdir / "junit" / f"{ADMITTED.id}.xml"
    stale.parent.mkdir(parents=True)
    stale.write_text("<stale/>")
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.observed == "install-failed"
    assert result.problems == ["installing jaxlib==0.10.2 failed (exit 1): no matching wheel"]
    failure = harness.junit(ADMITTED).find(".//failure")
    assert failure is not None and failure.get("message") == result.problems[0]


def test_the_frontends_own_tests_run_in_its_source_tree(harness: Harness, tmp_path: Path) -> None:
    harness.front.source_tree = tmp_path / "jax-src"
    harness.scripts[ADMITTED.id] = Script(own=(1, "F.\nFAILED tests/api_test.py::test_jit\n1 failed, 1 passed\n"),
                                          own_cases=[("tests.api_test", "test_jit", "failed"),
                                                     ("tests.api_test", "test_grad", "passed")])
    result = harness.run_cell(ADMITTED, keyword="jit or grad", frontend_tests=["tests/api_test.py"])
    assert result.frontend_tests == runner.TestCounts(passed=1, failed=1)
    assert result.problems == ["jax's own tests failed (F. | FAILED tests/api_test.py::test_jit | 1 failed, 1 passed)"]
    (_, (own, cwd)) = harness.pytest_runs(ADMITTED)
    assert cwd == str(tmp_path / "jax-src")
    assert own[3:6] == ("tests/api_test.py", "-k", "jit or grad")
    assert own[own.index("--junitxml") + 1].endswith(f"{ADMITTED.id}-frontend.xml")


def test_without_a_selection_the_frontends_tests_are_not_run(harness: Harness, tmp_path: Path) -> None:
    harness.front.source_tree = tmp_path / "jax-src"
    result = harness.run_cell(ADMITTED)
    assert result.ok and result.frontend_tests is None and len(harness.pytest_runs(ADMITTED)) == 1


def test_the_real_probes_against_a_fake_site(harness: Harness, site: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """GUARD_PROBE and IMPORT_PROBE themselves, run by this interpreter: the JSON the runner reads."""
    site.jax("0.10.2", "0.10.1")
    site.write("jax/__init__.py", "__version__ = '0.10.2'\ndef devices():\n    return ['cpu:0']\n")
    site.write("jax/numpy.py", "import warnings\nclass _A:\n    def sum(self):\n        return 3.0\n"
                               "def ones(n):\n    warnings.warn('old jaxlib', RuntimeWarning)\n    return _A()\n")
    site.jaxlib("0.10.0")
    monkeypatch.setattr(doctor, "read_environment", lambda family, python=None: REAL_INSPECT(family, path=site.path))
    for cell in (BELOW, ADMITTED):
        harness.scripts[cell.id] = Script(site=site.path)
    refused = harness.run_cell(BELOW)
    assert refused.ok and refused.observed == "refused", refused.problems
    assert refused.guard_fix == FIX and "JAXREL_SKIP_GUARD" in str(refused.guard_message)
    assert refused.frontend_import == {"version": "0.10.2", "sum": 3.0, "devices": ["cpu:0"],
                                       "warnings": ["old jaxlib"]}
    assert refused.backend_api["xla_ffi_api"] == "0.3"
    site.jaxlib("0.10.2")
    (site.root / "jaxlib-0.10.0.dist-info" / "METADATA").unlink()
    (site.root / "jaxlib-0.10.0.dist-info").rmdir()
    accepted = harness.run_cell(ADMITTED)
    assert accepted.ok and accepted.observed == "accepted", accepted.problems


def test_counts_of_a_missing_junit_file_are_zero(tmp_path: Path) -> None:
    assert runner._counts(tmp_path / "none.xml") == (runner.TestCounts(), {})


# -- the environment's own helpers ------------------------------------------------------------------


def test_a_failed_setup_step_names_the_step_and_its_output_tail() -> None:
    failing = "import sys; print('a\\nb\\n\\n  c  \\nd', file=sys.stderr); sys.exit(3)"
    with pytest.raises(envs.EnvError, match=r"^installing x failed \(exit 3\): b \| c \| d$"):
        envs.run_step([sys.executable, "-c", failing], dict(os.environ), "installing x")
    with pytest.raises(envs.EnvError, match=r"^step failed \(exit 1\): no output$"):
        envs.run_step([sys.executable, "-c", "raise SystemExit(1)"], dict(os.environ), "step")
    envs.run_step([sys.executable, "-c", "pass"], dict(os.environ), "a step that works")


def test_env_run_puts_its_bin_first_and_drops_pythonpath(tmp_path: Path) -> None:
    env = envs.Env(tmp_path / "venv")
    show = "import os; print(os.environ['PATH'].split(os.pathsep)[0], os.environ['VIRTUAL_ENV'], os.getcwd(), " \
           "os.environ.get('PYTHONPATH'), os.environ['EXTRA'])"
    done = env.run(sys.executable, "-c", show, env={"PYTHONPATH": "/elsewhere", "EXTRA": "1"}, cwd=str(tmp_path))
    assert done.returncode == 0 and done.stdout.split() == [str(env.bin), str(env.root), str(tmp_path), "None", "1"]
    assert env.python == tmp_path / "venv" / "bin" / "python"


# -- the run ----------------------------------------------------------------------------------------


def matrix(*cells: Cell) -> Matrix:
    return Matrix("jax", SPEC, "jaxlib", list(cells), ["no Python 3.13 wheels of jaxlib 0.10.0"])


def test_run_goes_through_every_cell_with_progress(harness: Harness) -> None:
    harness.scripts[BELOW.id] = Script(guard=(0, REFUSED, ""))
    harness.failures[PLUGINS.id] = IndexClientError("jax-cuda12-plugin 0.10.2: no wheel for Python 3.11")
    results = runner.run(matrix(ADMITTED, BELOW, PLUGINS, NEWER), FAMILY, harness.front, harness.options())
    assert [(r.cell.id, r.observed, r.ok) for r in results] == [
        (ADMITTED.id, "accepted", True), (BELOW.id, "refused", True), (PLUGINS.id, "install-failed", False),
        (NEWER.id, "accepted", False)]
    assert results[2].problems == ["jax-cuda12-plugin 0.10.2: no wheel for Python 3.11"]
    assert results[0].extension == results[1].extension == "not requested (--no-extension)"
    assert harness.progress[0] == f"[1/4] {ADMITTED.id}: admitted, expect accepted …"
    assert harness.progress[1].startswith(f"[1/4] {ADMITTED.id}: accepted · 2 passed, 1 skipped, 0 failed · ")
    assert harness.progress[1].endswith(" s · ok")
    assert harness.progress[5].endswith("FAILED: jax-cuda12-plugin 0.10.2: no wheel for Python 3.11")
    # the cells got a wheel of the running jaxrel
    wheel = Path(harness.created[ADMITTED.id]["no_deps"][1])
    assert wheel.name == f"jaxrel-{jaxrel.__version__}-py3-none-any.whl" and wheel.is_file()


def test_run_needs_a_suite(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(CompatError, match="no compat suite"):
        runner.run(matrix(ADMITTED), FAMILY, harness.front, harness.options(suite=tmp_path))


def test_extension_wheels_per_python(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert runner.extension_wheels(["3.11"], harness.options()) == {"3.11": "not requested (--no-extension)"}
    assert "no Bazel workspace" in str(runner.extension_wheels(["3.11"], harness.options(extensions=True))["3.11"])
    built = tmp_path / "rmsnorm-0.1-cp311-cp311-linux_x86_64.whl"

    def build(workspace: Path, *, python: str, output: Path) -> bazel.BuildResult:
        if python.endswith("3.12"):
            raise bazel.BuildError("bazel build failed: no toolchain")
        return bazel.BuildResult(wheels=[built], seconds=1.5, command=["bazel"])

    monkeypatch.setattr(runner, "python_for", lambda version: Python(version, f"/usr/bin/python{version}"))
    monkeypatch.setattr(bazel, "build", build)
    found = runner.extension_wheels(["3.11", "3.12"], harness.options(extensions=True, workspace=tmp_path))
    assert found == {"3.11": [built], "3.12": "not built: bazel build failed: no toolchain"}
    assert f"extension: {built.name} (1.5 s)" in harness.progress
    assert "extension: not built: bazel build failed: no toolchain" in harness.progress


# -- the report -------------------------------------------------------------------------------------


@pytest.fixture
def results(harness: Harness, tmp_path: Path) -> list[runner.CellResult]:
    """Four cells as a run leaves them: green, refused as expected, failed suite, wrong verdict."""
    harness.scripts[BELOW.id] = Script(guard=(0, REFUSED, ""), probe=(1, "", "RuntimeError: jaxlib version too old\n"))
    harness.scripts[PLUGINS.id] = Script(suite=(1, PYTEST_FAILED),
                                         cases=[("test_ffi", "test_call", "failed"), *PASSING[1:],
                                                ("test_shard_map", "test_mesh", "error")])
    harness.front.source_tree = tmp_path / "jax-src"
    extension = [tmp_path / "rmsnorm-0.1-cp311-cp311-linux_x86_64.whl"]
    return [harness.run_cell(ADMITTED, extension, keyword="jit"), harness.run_cell(BELOW, "not requested"),
            harness.run_cell(PLUGINS, extension), harness.run_cell(NEWER)]


def test_report_table_and_summary(results: list[runner.CellResult]) -> None:
    lines = report.table(results).splitlines()
    assert lines[0].split() == ["cell", "expected", "observed", "passed", "failed", "skipped", "own", "tests",
                                "extension", "time", "result"]
    assert set(lines[1]) == {"-", " "} and len(lines) == 6
    assert lines[2].startswith(ADMITTED.id) and lines[2].endswith("  ok")
    assert "1 passed, 0 failed, 0 skipped" in lines[2] and "1/1 passed" in lines[2]
    assert "refused (backend-at-least-minimum)" in lines[3] and lines[3].endswith("  ok")
    assert lines[4].endswith("FAILED") and lines[5].endswith("FAILED")
    observed = lines[0].index("observed")  # the columns line up
    assert [line[observed:].split()[0] for line in lines[2:]] == ["accepted", "refused", "accepted", "accepted"]
    assert report.summary(results) == (
        f"4 cells (2 positive, 2 negative): 2 as expected, 2 FAILED: {PLUGINS.id}, {NEWER.id}\n"
        "extension: not requested\nextension: rmsnorm-0.1-cp311-cp311-linux_x86_64.whl")  # wheels, or why none
    assert report.summary(results[:1]).startswith("1 cell (1 positive, 0 negative): 1 as expected\n")
    assert "own tests" not in report.table(results[1:2]), "the column only when a cell ran them"


def test_report_markdown(results: list[runner.CellResult]) -> None:
    text = report.markdown(matrix(ADMITTED, BELOW, PLUGINS, NEWER), results)
    assert text.startswith("# compat: jax 0.10.2\n\nFrontend: wheel jax-0.10.2-py3-none-any.whl; minimum jaxlib "
                           "0.10.1; declared range >=0.10.1,<=0.10.2.\n")
    assert f"| `{ADMITTED.id}` | accepted | accepted | 2 | 0 | 1 | 1 passed, 0 failed, 0 skipped | 1/1 passed |" in text
    assert "- no Python 3.13 wheels of jaxlib 0.10.0" in text
    assert (f"- `{BELOW.id}`: jaxlib is version 0.10.0; jax 0.10.2 needs 0.10.1 <= jaxlib <= 0.10.2. Fix: {FIX} — "
            "real jax without the guard: RuntimeError: jaxlib version too old") in text
    assert "| cell | ifrt_version | jaxlib_extension_version | xla_ffi_api |" in text
    assert f"| `{ADMITTED.id}` | – | 467 | 0.3 |" in text
    assert f"| test | `{ADMITTED.id}` | `{PLUGINS.id}` |" in text
    assert "| `test_call` | ✓ | ✗ failed |" in text and "| `test_mesh` | – | ✗ error |" in text
    assert "| `test_cuda` | skip: no GPU / none found | skip: no GPU / none found |" in text
    assert f"- `{PLUGINS.id}`: compat suite: 1 failed, 1 errors (FAILED test_ffi.py::test_call" in text
    assert f"- `{NEWER.id}`: expected refused, the guard accepted it" in text
    assert text.endswith("\n")


def test_report_json_and_write(results: list[runner.CellResult], tmp_path: Path) -> None:
    the_matrix = matrix(ADMITTED, BELOW, PLUGINS, NEWER)
    data = report.to_json(the_matrix, results)
    assert data["ok"] is False and data["summary"] == report.summary(results)
    assert data["matrix"] == the_matrix.to_json()
    assert [cell["cell"]["id"] for cell in data["cells"]] == [ADMITTED.id, BELOW.id, PLUGINS.id, NEWER.id]
    assert data["cells"][1]["guard_fix"] == FIX and data["cells"][0]["tests"]["passed"] == 2
    assert report.to_json(the_matrix, results[:2])["ok"] is True
    out = tmp_path / "reports" / "new"
    json_path, md_path = report.write(out, the_matrix, results)
    assert (json_path, md_path) == (out / "report.json", out / "report.md")
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(data))
    assert md_path.read_text() == report.markdown(the_matrix, results)
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]


def test_report_write_is_all_or_nothing(results: list[runner.CellResult], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    (out / "report.json").write_text("old json")
    (out / "report.md").write_text("old md")
    real_replace, calls = os.replace, []

    def replace_then_fail(source: str, target: str | Path) -> None:
        calls.append(target)
        if len(calls) == 2:
            raise OSError("disk full")
        real_replace(source, target)

    monkeypatch.setattr(atomic.os, "replace", replace_then_fail)
    with pytest.raises(OSError, match="disk full"):
        report.write(out, matrix(ADMITTED), results)
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    assert (out / "report.json").read_text() == "old json" and (out / "report.md").read_text() == "old md"
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]


def test_a_cell_installs_the_verified_files_and_records_their_sha256(harness: Harness, tmp_path: Path) -> None:
    from jaxrel._util.files import sha256_of
    from jaxrel.compat.index import Index

    house = tmp_path / "wheelhouse"
    house.mkdir()
    names = {"jaxlib": "jaxlib-0.10.2-py3-none-any.whl",
             "jax-cuda12-plugin": "jax_cuda12_plugin-0.10.2-py3-none-any.whl",
             "jax-cuda12-pjrt": "jax_cuda12_pjrt-0.10.2-py3-none-any.whl"}
    for filename in names.values():
        (house / filename).write_bytes(filename.encode())
    index = Index([], [house], cache=tmp_path / "cache")
    result = harness.run_cell(PLUGINS, index=index)
    created = harness.created[PLUGINS.id]
    assert created["requirements"][0] == str(house / names["jaxlib"]), "the verified file, not jaxlib==V by name"
    assert str(house / names["jax-cuda12-plugin"]) in created["no_deps"]
    assert result.wheels[names["jaxlib"]] == sha256_of(house / names["jaxlib"])
    assert set(result.wheels) >= {*names.values(), harness.front.wheel.name}  # type: ignore[union-attr]


def test_a_wheel_rewritten_in_place_with_its_mtime_reset_is_refused(harness: Harness, tmp_path: Path) -> None:
    """A wheelhouse copy whose bytes change behind the same size and mtime no longer matches the index's
    sha256, and the cell refuses it, naming the file (the hash cache keys on ctime and inode too)."""
    import hashlib
    import os

    from jaxrel.compat.index import Index

    original = b"the original bytes"
    served = tmp_path / "served"
    (served / "jaxlib").mkdir(parents=True)
    name = "jaxlib-0.10.2-py3-none-any.whl"
    (served / name).write_bytes(original)
    digest = hashlib.sha256(original).hexdigest()
    (served / "jaxlib" / "index.html").write_text(f'<a href="../{name}#sha256={digest}">{name}</a>\n')
    house = tmp_path / "wheelhouse"
    house.mkdir()
    wheel = house / name
    wheel.write_bytes(original)

    def index() -> Index:
        return Index([served.as_uri()], [house], cache=tmp_path / "cache")

    result = harness.run_cell(ADMITTED, index=index())
    assert result.wheels[name] == digest and harness.created[ADMITTED.id]["requirements"][0] == str(wheel)
    before = wheel.stat()
    wheel.write_bytes(b"the tampered bytes")  # the same size
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (wheel.stat().st_size, wheel.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    refused = harness.run_cell(ADMITTED, index=index())
    assert refused.observed == "install-failed" and not refused.ok
    assert str(wheel) in refused.problems[0] and "altered" in refused.problems[0]
