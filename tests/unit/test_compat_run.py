"""The compat runner and its report, offline.

A fake environment stands in for ``envs.create``: its ``run`` answers the guard probe, the
import probe and pytest with canned output (pytest also writes its junit XML and the record
of jaxrel's cell plugin: outcomes by node id, where the frontend was imported from; a rerun
of chosen tests answers from the script's ``rerun`` outcomes), so every branch of a cell, the
triage of failed tests, the whole run and the report are covered without an index or real
wheels. One test runs the real probes, with this interpreter, against a fake site-packages.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging import tags as packaging_tags

import jaxrel
from jaxrel._util import atomic
from jaxrel.cells import driver, probes, records, suites
from jaxrel.cells import environment as cell_environment
from jaxrel.cells.frontend import CompatError, PreparedFrontend
from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix
from jaxrel.cells.owntests import OwnTests
from jaxrel.compat import cell as compat_cell
from jaxrel.compat import report
from jaxrel.compat import run as compat_run
from jaxrel.compat.options import Options
from jaxrel.distributions import bazel, envs, installed
from jaxrel.distributions.index import IndexClientError
from jaxrel.distributions.pythons import Python
from jaxrel.distributions.wheels import ArtifactInfo
from jaxrel.family import jax_profile

FAMILY = jax_profile()
SPEC = FrontendSpec("jax", "0.10.2", "0.10.1", "wheel jax-0.10.2-py3-none-any.whl", ">=0.10.1,<=0.10.2", ">=3.11")
FIX = 'pip install "jaxlib>=0.10.1,<=0.10.2"'
ADMITTED = Cell("py3.11-jaxlib0.10.2", "3.11", "0.10.2", (), "admitted", "accepted")
OLDER = Cell("py3.11-jaxlib0.10.1", "3.11", "0.10.1", (), "admitted", "accepted")
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
PASSING = [("test_ffi.py", "test_call", "passed"), ("test_extension.py", "test_rmsnorm", "passed"),
           ("test_plugins.py", "test_cuda", "skipped: no GPU | none found")]
REAL_INSPECT: Callable[..., installed.Environment] = installed.read_environment  # before the harness replaces it
PYTEST_FAILED = ("..F.E\n\n=== short test summary info ===\nFAILED test_ffi.py::test_call - assert 1 == 2\n"
                 "ERROR test_shard_map.py::test_mesh - RuntimeError\n\n1 failed, 2 passed, 1 error in 0.52s\n")


def completed(args: tuple[str, ...], returncode: int, stdout: str = "", stderr: str = "") -> \
        subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(list(args), returncode, stdout, stderr)


Case = tuple[str, str, str]  # (file, test name or "" for a collection error, outcome)


def node(case: Case) -> str:
    return f"{case[0]}::{case[1]}" if case[1] else case[0]


def write_junit(path: Path, cases: list[Case]) -> None:
    """A junit XML file as pytest writes it: ``(file, name, outcome)`` per test case."""
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(root, "testsuite", name="pytest")
    for file, name, outcome in cases:
        case = ElementTree.SubElement(suite, "testcase", classname=file.removesuffix(".py").replace("/", "."),
                                      name=name)
        if outcome.startswith(("failed", "error")):
            ElementTree.SubElement(case, "failure" if outcome.startswith("failed") else "error", message="boom")
        elif outcome.startswith("skipped"):
            ElementTree.SubElement(case, "skipped", message=outcome.split(":", 1)[1].strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_record(directory: Path, cases: list[Case], frontend_file: str | None) -> None:
    """What jaxrel's cell plugin records at the end of a pytest run (see jaxrel.cells.pytest_plugin)."""
    outcomes = {}
    for case in cases:
        outcome, _, message = case[2].partition(":")  # "failed", "failed: why", "skipped: why", "error: collection: …"
        outcomes[node(case)] = {"outcome": outcome,
                                "message": message.strip() or ("boom" if outcome in ("failed", "error") else "")}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "main.json").write_text(json.dumps({"frontend_file": frontend_file, "outcomes": outcomes}))


PROBE_PARTS = ("interpreter start", "guard", "import jax")  # what "probes" is made of, timed in the driver
IN_ENV = "in the cell"  # Script.frontend_file: the cell's own site-packages


@dataclass
class Script:
    """What the fake environment answers: ``(returncode, stdout, stderr)`` per probe, cases per pytest run."""

    guard: tuple[int, str, str] = (0, ACCEPTED + "\n", "")
    probe: tuple[int, str, str] = (0, IMPORTED + "\n", "")
    suite: tuple[int, str] = (0, "...s\n3 passed, 1 skipped in 0.1s\n")
    cases: list[Case] = field(default_factory=lambda: list(PASSING))
    own: tuple[int, str] = (0, "2 passed in 0.1s\n")
    own_cases: list[Case] = field(default_factory=lambda: [("tests/api_test.py", "test_jit", "passed")])
    rerun: dict[str, str] = field(default_factory=dict)  # node id -> its outcome when rerun (default: as before)
    frontend_file: str | None = IN_ENV  # where the own tests imported the frontend from
    recorded: bool = True  # False: pytest crashed before the cell plugin wrote its record
    site: list[str] | None = None  # run the two probes for real, with this sys.path


@dataclass(frozen=True)
class FakeEnv(envs.Env):
    script: Script = field(default_factory=Script)
    calls: list[tuple[tuple[str, ...], str | None]] = field(default_factory=list)
    variables: list[dict[str, str]] = field(default_factory=list)  # the env= of each pytest run
    suite_runs: list[tuple[tuple[str, ...], str | None]] = field(default_factory=list)  # pytest's argv, cwd

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
            cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append((args, cwd))
        if args[1:3] == ("-c", driver.DRIVER):
            return self.drive(args, env or {}, timeout, cwd)
        if args[1] == "-c":
            if self.script.site is not None:
                path = os.pathsep.join([*self.script.site, str(Path(jaxrel.__file__).parents[1])])
                return subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=timeout,
                                      env={**os.environ, "PYTHONPATH": path, "JAXREL_SKIP_GUARD": ""})
            return completed(args, *(self.script.guard if args[2] == probes.GUARD_PROBE else self.script.probe))
        assert args[1:3] == ("-m", "pytest") and env is not None and cwd is not None, args
        return self.pytest(args, env, cwd)

    def drive(self, args: tuple[str, ...], env: dict[str, str], timeout: float,
              cwd: str | None) -> subprocess.CompletedProcess[str]:
        """The cell's driver (jaxrel.cells.driver): the guard, the import, then pytest in one interpreter.

        Real with ``script.site``; else it answers from the script: the guard's JSON (no JSON: the interpreter
        died before writing a result), the import probe's, and pytest's run as the subprocess would."""
        spec = json.loads(args[3])
        if self.script.site is not None:
            path = os.pathsep.join([*self.script.site, str(Path(jaxrel.__file__).parents[1])])
            return subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=timeout,
                                  cwd=cwd, env={**{k: v for k, v in os.environ.items()  # as Env.run does
                                                   if not k.startswith(envs.INHERITED_TEST_STATE)},
                                                **env, "PYTHONPATH": path, "JAXREL_SKIP_GUARD": ""})
        returncode, stdout, stderr = self.script.guard
        guard = probes.last_json(stdout) if returncode == 0 else None
        if guard is None:
            return completed(args, returncode, stdout, stderr)
        result: dict[str, Any] = {"guard": guard, "timings": {"guard": 0.01, "import": 0.5}}
        returncode, stdout, stderr = self.script.probe
        imported = probes.last_json(stdout) if returncode == 0 else None
        Path(spec["stderr"]).write_text(stderr)
        if imported is None:
            result["import_error"] = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
        else:
            result["import"] = imported
        Path(spec["out"]).write_text(json.dumps(result))
        if spec["pytest"] is None or not guard["accepted"]:
            return completed(args, 0)
        chosen = spec["pytest"]
        if spec["cpu_only_pytest"] and (imported or {}).get("platforms") == ["cpu"]:
            chosen, result["cpu_only"] = spec["cpu_only_pytest"], True
        pytest_args = (args[0], "-m", "pytest", *chosen)
        done = self.pytest(pytest_args, {**spec["env"], records.RECORD: spec["record"],
                                         records.PACKAGE: spec["package"]}, cwd or "")
        if self.script.recorded:
            result["returncode"] = done.returncode
            result["timings"]["suite"] = 1.0
            Path(spec["out"]).write_text(json.dumps(result))
        return completed(args, done.returncode, done.stdout, done.stderr)

    def pytest(self, args: tuple[str, ...], env: dict[str, str], cwd: str) -> subprocess.CompletedProcess[str]:
        self.suite_runs.append((args, cwd))
        self.variables.append(env)
        own = cwd != str(suites.DEFAULT_SUITE)
        cases = self.script.own_cases if own else self.script.cases
        if records.ONLY in env:  # a rerun of chosen tests
            wanted = Path(env[records.ONLY]).read_text().split()
            cases = [(f, n, self.script.rerun.get(node((f, n, o)), o)) for f, n, o in cases
                     if node((f, n, o)) in wanted]
            answer = (1 if any(o.startswith(("failed", "error")) for _, _, o in cases) else 0, "rerun\n")
        else:
            answer = self.script.own if own else self.script.suite
        if "--junitxml" in args:
            write_junit(Path(args[args.index("--junitxml") + 1]), cases)
        if self.script.recorded:
            where = (str(self.root / "lib" / "python3.11" / "site-packages" / "jax" / "__init__.py")
                     if self.script.frontend_file == IN_ENV else self.script.frontend_file)
            write_record(Path(env[records.RECORD]), cases, where if own else None)
        return completed(args, *answer)


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

    def options(self, **changes: Any) -> Options:
        return Options(**{"workdir": self.workdir, "extensions": False, "progress": self.progress.append,
                                 "cells_at_once": 1, **changes})

    def own(self, tmp_path: Path, requirements: Path | None = None, options: tuple[str, ...] = (),
            test_files: int = 1) -> OwnTests:
        """Own tests staged in ``tmp_path/staged`` (what owntests.plan makes)."""
        return OwnTests(suites.Suite("own tests", "own", tmp_path / "staged", ("tests/api_test.py",), options,
                                     parallel=True, test_files=test_files), requirements)

    def run_cell(self, cell: Cell, extensions: list[Path] | str | None = None,
                 **changes: Any) -> compat_cell.CellResult:
        for wheel in [self.front.wheel, self.workdir / "jaxrel-0.1-py3-none-any.whl",
                      *(extensions if isinstance(extensions, list) else [])]:
            assert wheel is not None
            wheel.parent.mkdir(parents=True, exist_ok=True)
            wheel.write_bytes(wheel.name.encode())  # the runner records each installed file's sha256
        twin = changes.pop("cpu_twin", None)
        return compat_cell.run_cell(cell, FAMILY, self.front, self.workdir / "jaxrel-0.1-py3-none-any.whl",
                               self.options(**changes), extensions, twin)

    def junit(self, cell: Cell) -> ElementTree.Element:
        return ElementTree.parse(self.workdir / "junit" / f"{cell.id}.xml").getroot()

    def pytest_runs(self, cell: Cell) -> list[tuple[tuple[str, ...], str | None]]:
        """Each pytest run: in the driver's interpreter or its own, as ``(python -m pytest ..., cwd)``."""
        return self.envs[cell.id].suite_runs

    def verdicts(self, cell: Cell) -> ElementTree.Element:
        return ElementTree.parse(self.workdir / "junit" / f"{cell.id}-verdicts.xml").getroot()


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
        world.envs[cell] = FakeEnv(root, script=world.scripts.get(cell, Script()))
        return world.envs[cell]

    def inspect(family: Any, python: str | None = None, path: list[str] | None = None) -> installed.Environment:
        assert python is not None and python.endswith("bin/python")
        return installed.Environment(python, "3.11.7", api_numbers={"jaxlib_extension_version": 467,
                                                                  "ifrt_version": None}, xla_ffi_api="0.3")

    def existing(root: Path, bytecode: Path | None = None) -> envs.Env:
        return world.envs[root.name]

    monkeypatch.setattr(envs, "create", create)
    monkeypatch.setattr(envs, "existing", existing)
    monkeypatch.setattr(cell_environment, "python_for", lambda version: Python(version, sys.executable))
    monkeypatch.setattr(installed, "read_environment", inspect)
    return world


# -- one cell ---------------------------------------------------------------------------------------


def test_an_accepted_positive_cell_with_a_passing_suite_is_ok(harness: Harness) -> None:
    wheel = harness.workdir / "extensions" / "rmsnorm-0.1-cp311-cp311-linux_x86_64.whl"
    result = harness.run_cell(PLUGINS, [wheel])
    assert result.ok and result.observed == "accepted" and result.problems == []
    assert (result.tests.passed, result.tests.failed, result.tests.skipped, result.tests.errors) == (2, 0, 1, 0)
    # test ids are pytest's node ids: the module stays in them (two modules may have tests of one name)
    assert result.outcomes == {"test_ffi.py::test_call": "passed", "test_extension.py::test_rmsnorm": "passed",
                               "test_plugins.py::test_cuda": "skipped: no GPU | none found"}
    assert result.failures == [] and result.frontend_tests is None
    assert result.frontend_import == json.loads(IMPORTED) and result.import_error is None
    assert result.backend_api == {"jaxlib_extension_version": 467, "ifrt_version": None, "xla_ffi_api": "0.3"}
    assert result.extension == wheel.name and result.seconds > 0
    # what the environment was made of: the backend and the frontend's plain requirements, then --no-deps
    created = harness.created[PLUGINS.id]
    assert created["python"] == sys.executable
    assert created["requirements"] == ["jaxlib==0.10.2", "numpy>=1.26", "opt_einsum", "pytest"]
    assert created["no_deps"] == [str(harness.front.wheel), str(harness.workdir / "jaxrel-0.1-py3-none-any.whl"),
                                  "jax-cuda12-plugin==0.10.2", "jax-cuda12-pjrt==0.10.2", str(wheel)]
    # one interpreter: the guard called as the frontend calls it, the import with the smoke code, the compat suite
    ((call, cwd),) = harness.envs[PLUGINS.id].calls
    assert call[1:3] == ("-c", driver.DRIVER) and cwd == str(suites.DEFAULT_SUITE)
    spec = json.loads(call[3])
    arguments = spec["guard"]
    assert arguments["frontend_version"] == "0.10.2" and arguments["minimum_backend"] == "0.10.1"
    assert ["jax-cuda12-plugin", True] in arguments["plugins"]
    assert spec["package"] == "jax" and spec["smoke"] == FAMILY.frontend.smoke
    assert spec["pytest"][0] == str(suites.DEFAULT_SUITE) and "--junitxml" in spec["pytest"]
    # every pytest run loads the cell plugin, which records outcomes and where the frontend came from
    assert "jaxrel.cells.pytest_plugin" in spec["pytest"]
    cache = spec["env"].pop("JAX_COMPILATION_CACHE_DIR")  # XLA's compiled programs kept per backend build
    assert Path(cache).parent == harness.workdir / "xla-cache" and Path(cache).name.startswith(f"{PLUGINS.id}-")
    assert spec["env"] == {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}, "no plugin but the cell's"
    (variables,) = harness.envs[PLUGINS.id].variables
    assert variables[records.PACKAGE] == "jax" and records.SHARD not in variables
    assert set(result.timings) == {"environment", "probes", "compat suite", *PROBE_PARTS}
    # the junit file is pytest's own
    assert len(harness.junit(PLUGINS).findall(".//testcase")) == 3


def test_a_failing_suite_fails_the_cell_with_each_failure_and_its_error(harness: Harness) -> None:
    """Changed by #13: the cell names each failed test and its error (not pytest's last lines); they stay
    unclassified, failing the cell, until the run's triage sorts them."""
    harness.scripts[ADMITTED.id] = Script(suite=(1, PYTEST_FAILED),
                                          cases=[*PASSING[:2], ("test_ffi.py", "test_bad", "failed: assert 1 == 2"),
                                                 ("test_shard_map.py", "test_mesh", "error: RuntimeError")])
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.observed == "accepted"
    assert (result.tests.passed, result.tests.failed, result.tests.errors) == (2, 1, 1)
    assert result.outcomes["test_ffi.py::test_bad"] == "failed"
    assert result.outcomes["test_shard_map.py::test_mesh"] == "error"
    assert result.problems == []
    assert [(f.suite, f.test, f.outcome, f.message, f.verdict) for f in result.failures] == [
        ("compat suite", "test_ffi.py::test_bad", "failed", "assert 1 == 2", "unclassified"),
        ("compat suite", "test_shard_map.py::test_mesh", "error", "RuntimeError", "unclassified")]
    assert compat_cell.cell_line(result).endswith(
        "FAILED: 2 unclassified (compat suite test_ffi.py::test_bad: assert 1 == 2)")
    assert result.extension is None


def test_a_suite_that_crashes_without_its_record_fails_too(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(suite=(4, "ERROR: usage: pytest [options]\n"), cases=[], recorded=False)
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.tests == suites.TestCounts()
    assert result.problems == ["compat suite: pytest exited 4 without results: ERROR: usage: pytest [options]"]


def test_a_pytest_exit_status_its_record_does_not_explain_fails_the_cell(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(suite=(3, "INTERNALERROR> boom\n"))
    result = harness.run_cell(ADMITTED)
    assert not result.ok and result.tests.passed == 2
    assert result.problems == ["compat suite: pytest exited 3 without explaining why: INTERNALERROR> boom"]


def test_env_reaches_the_compat_suite_run_in_the_driver(harness: Harness) -> None:
    assert harness.run_cell(ADMITTED, test_env=(("JAX_ENABLE_X64", "1"),)).ok
    ((call, _),) = harness.envs[ADMITTED.id].calls
    assert json.loads(call[3])["env"]["JAX_ENABLE_X64"] == "1"
    (variables,) = harness.envs[ADMITTED.id].variables
    assert variables["JAX_ENABLE_X64"] == "1" and variables[records.RECORD]


def test_the_compile_cache_can_be_turned_off_or_pointed_elsewhere(harness: Harness) -> None:
    assert harness.run_cell(ADMITTED, compile_cache=False).ok
    ((call, _),) = harness.envs[ADMITTED.id].calls
    assert not any(name.startswith("JAX_") for name in json.loads(call[3])["env"]), "--no-compile-cache: none"
    assert harness.run_cell(ADMITTED, test_env=(("JAX_COMPILATION_CACHE_DIR", "/mine"),)).ok
    (call, _) = harness.envs[ADMITTED.id].calls[-1]
    assert json.loads(call[3])["env"]["JAX_COMPILATION_CACHE_DIR"] == "/mine", "the user's --env wins"


def test_no_tests_collected_is_not_a_failure(harness: Harness) -> None:
    harness.scripts[ADMITTED.id] = Script(suite=(5, "no tests ran in 0.01s\n"), cases=[])
    assert harness.run_cell(ADMITTED, shard="4/4").ok


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


def test_the_frontends_own_tests_run_outside_its_source_tree(harness: Harness, tmp_path: Path) -> None:
    """Changed by #13: they run where owntests staged them (with the tree's pytest configuration), never in the
    source tree, so `import jax` finds the wheel; positive cells install their test requirements."""
    requirements = tmp_path / "jax-src" / "build" / "test-requirements.txt"
    own = harness.own(tmp_path, requirements, ("-k", "jit or grad"))
    harness.scripts[ADMITTED.id] = Script(own=(1, "F.\nFAILED tests/api_test.py::test_jit\n1 failed, 1 passed\n"),
                                          own_cases=[("tests/api_test.py", "test_jit", "failed: AssertionError: 1"),
                                                     ("tests/api_test.py", "test_grad", "passed")])
    result = harness.run_cell(ADMITTED, own=own)
    assert result.frontend_tests == suites.TestCounts(passed=1, failed=1)
    assert result.problems == [] and not result.ok
    assert [(f.suite, f.test, f.message) for f in result.failures] == [
        ("own tests", "tests/api_test.py::test_jit", "AssertionError: 1")]
    (_, (args, cwd)) = harness.pytest_runs(ADMITTED)
    assert cwd == str(tmp_path / "staged") and args[3] == "tests/api_test.py"
    assert args[args.index("-k") + 1] == "jit or grad" and "-n" not in args, "no pytest-xdist in this cell"
    assert args[args.index("--rootdir") + 1] == str(tmp_path / "staged")
    assert args[args.index("--junitxml") + 1].endswith(f"{ADMITTED.id}-frontend.xml")
    assert harness.created[ADMITTED.id]["requirement_files"] == [requirements]
    site = harness.workdir / "envs" / ADMITTED.id / "lib" / "python3.11" / "site-packages"
    assert result.frontend_files == [str(site / "jax" / "__init__.py")]
    assert set(result.timings) == {"environment", "probes", "compat suite", "own tests", *PROBE_PARTS}


def test_a_plugin_cell_without_its_device_leaves_the_own_tests_to_device_runners(harness: Harness,
                                                                                 tmp_path: Path) -> None:
    """jax sees only CPU devices: the plugin cell's own tests would repeat the plain cell's, so they are not
    run (with the reason); the compat suite, which holds the plugin's own checks, still runs."""
    cpu_only = json.dumps({"version": "0.10.2", "sum": 3.0, "devices": ["TFRT_CPU_0"], "platforms": ["cpu"],
                           "warnings": []})
    harness.scripts[PLUGINS.id] = Script(probe=(0, cpu_only + "\n", ""))
    result = harness.run_cell(PLUGINS, own=harness.own(tmp_path))
    assert result.ok and result.frontend_tests is None and result.tests.passed == 2
    assert result.own_tests_not_run == "no gpu here (only cpu devices); they run on gpu runners"
    assert [args[3] for args, _ in harness.pytest_runs(PLUGINS)] == [str(suites.DEFAULT_SUITE)]
    assert "not run: no gpu here" in report.table([result])
    # with its device, and on a cell without plugins, the own tests run
    gpu = json.dumps({"version": "0.10.2", "sum": 3.0, "devices": ["cuda:0"], "platforms": ["gpu"], "warnings": []})
    harness.scripts[PLUGINS.id] = Script(probe=(0, gpu + "\n", ""))
    assert harness.run_cell(PLUGINS, own=harness.own(tmp_path)).frontend_tests is not None
    harness.scripts[ADMITTED.id] = Script(probe=(0, cpu_only + "\n", ""))
    assert harness.run_cell(ADMITTED, own=harness.own(tmp_path)).frontend_tests is not None


def test_a_plugin_cell_without_its_device_runs_the_plugin_tests_when_its_plain_twin_runs_the_rest(
        harness: Harness) -> None:
    """Only CPU devices: the suite's other tests would run the same jax on the same jaxlib's CPU as the plain cell
    of the run with that jaxlib, so the plugin cell runs test_plugins.py; with its device, without a twin or
    with --full-plugin-cells it runs them all."""
    cpu_only = json.dumps({"version": "0.10.2", "sum": 3.0, "devices": ["TFRT_CPU_0"], "platforms": ["cpu"],
                           "warnings": []})
    harness.scripts[PLUGINS.id] = Script(probe=(0, cpu_only + "\n", ""))
    result = harness.run_cell(PLUGINS, cpu_twin=ADMITTED.id)
    assert result.ok and result.cpu_suite_in == ADMITTED.id
    [(argv, _)] = harness.pytest_runs(PLUGINS)
    assert argv[3] == str(suites.DEFAULT_SUITE / suites.PLUGIN_TESTS) and "--junitxml" in argv
    line = compat_cell.cell_line(result)
    assert "test_plugins.py only: no gpu here, the CPU suite runs in py3.11-jaxlib0.10.2" in line
    assert "plugin tests only (" in report.summary([result]) and PLUGINS.id in report.summary([result])
    assert report.to_json(matrix(PLUGINS), [result])["cells"][0]["cpu_suite_in"] == ADMITTED.id
    for script, twin in [(Script(), ADMITTED.id),  # its device is here (the script's platforms)
                         (Script(probe=(0, cpu_only + "\n", "")), None)]:  # no twin (or --full-plugin-cells)
        harness.scripts[PLUGINS.id] = script
        again = harness.run_cell(PLUGINS, cpu_twin=twin)
        assert again.cpu_suite_in is None and again.tests.passed == 2
        assert [args[3] for args, _ in harness.pytest_runs(PLUGINS)] == [str(suites.DEFAULT_SUITE)]


def test_plugin_cells_have_a_cpu_twin_only_beside_a_plain_positive_cell_of_their_python_and_backend(
        harness: Harness) -> None:
    cuda_older = Cell("py3.11-jaxlib0.10.1-cuda12", "3.11", "0.10.1", (("jax-cuda12-plugin", "0.10.1"),),
                      "plugins", "accepted")
    cells = [ADMITTED, PLUGINS, cuda_older, BELOW]
    assert compat_cell.cpu_twins(cells, harness.options()) == {PLUGINS.id: ADMITTED.id}
    twins = compat_cell.cpu_twins([*cells, OLDER], harness.options())
    assert twins == {PLUGINS.id: ADMITTED.id, cuda_older.id: OLDER.id}
    assert compat_cell.cpu_twins(cells, harness.options(full_plugin_cells=True)) == {}
    assert compat_cell.cpu_twins([PLUGINS], harness.options()) == {}, "rerun alone (--cell): the whole suite"


def test_negative_cells_install_no_test_requirements(harness: Harness, tmp_path: Path) -> None:
    harness.scripts[BELOW.id] = Script(guard=(0, REFUSED + "\n", ""))
    result = harness.run_cell(BELOW, own=harness.own(tmp_path, tmp_path / "requirements.txt"))
    assert result.ok and harness.created[BELOW.id]["requirement_files"] == []
    assert harness.pytest_runs(BELOW) == []


def test_own_tests_that_imported_the_frontend_from_elsewhere_fail_the_cell(harness: Harness, tmp_path: Path) -> None:
    harness.scripts[ADMITTED.id] = Script(frontend_file=str(tmp_path / "jax-src" / "jax" / "__init__.py"))
    result = harness.run_cell(ADMITTED, own=harness.own(tmp_path))
    assert not result.ok and result.frontend_tests == suites.TestCounts(passed=1)
    assert result.problems == [
        f"the own tests imported jax from {tmp_path / 'jax-src' / 'jax' / '__init__.py'}, not from the cell's "
        f"environment {harness.workdir / 'envs' / ADMITTED.id}: they did not test the installed wheel"]


def test_an_import_probe_that_found_another_frontend_fails_the_cell(harness: Harness, tmp_path: Path) -> None:
    elsewhere = str(tmp_path / "jax-src" / "jax" / "__init__.py")
    harness.scripts[ADMITTED.id] = Script(probe=(0, json.dumps({"version": "0.10.2", "file": elsewhere}), ""))
    result = harness.run_cell(ADMITTED)
    assert result.problems == [f"jax was imported from {elsewhere}, not from the cell's environment "
                               f"{harness.workdir / 'envs' / ADMITTED.id}"]
    assert not result.ok


def test_a_collection_error_is_an_error_with_its_cause(harness: Harness, tmp_path: Path) -> None:
    cause = "ModuleNotFoundError: No module named 'absl'"
    harness.scripts[ADMITTED.id] = Script(own=(2, "!!! Interrupted: 1 error during collection !!!\n"),
                                          own_cases=[("tests/api_test.py", "", f"error: collection: {cause}")])
    result = harness.run_cell(ADMITTED, own=harness.own(tmp_path))
    assert result.problems == [], "exit status 2 is explained by the collection error"
    assert result.frontend_tests == suites.TestCounts(errors=1) and not result.ok
    (failure,) = result.failures
    assert (failure.test, failure.outcome, failure.message) == ("tests/api_test.py", "error", f"collection: {cause}")
    assert compat_cell.cell_line(result).endswith(f"FAILED: 1 unclassified (own tests tests/api_test.py: {cause})")


def test_xdist_and_shards(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pytest-xdist worker per core (at most 4) for the own tests when the cell has xdist and they span two
    test modules per worker; every suite sharded."""
    xdist = harness.workdir / "envs" / ADMITTED.id / "lib" / "python3.11" / "site-packages" / "xdist"
    xdist.mkdir(parents=True)
    (xdist / "__init__.py").write_text("")
    monkeypatch.setattr(compat_cell.os, "cpu_count", lambda: 2)
    harness.run_cell(ADMITTED, own=harness.own(tmp_path, test_files=4), shard="2/3")
    suite, own = (args for args, _ in harness.pytest_runs(ADMITTED))
    assert "-n" not in suite and own[own.index("-n") + 1] == "2"
    assert [v[records.SHARD] for v in harness.envs[ADMITTED.id].variables] == ["2/3", "2/3"]
    for own_tests, changes in ((harness.own(tmp_path, test_files=3), {}), (harness.own(tmp_path, test_files=4),
                                                                             {"jobs": 1})):
        harness.run_cell(ADMITTED, own=own_tests, **changes)
        assert "-n" not in harness.pytest_runs(ADMITTED)[1][0], changes or "too few test modules to pay"
    harness.run_cell(ADMITTED, own=harness.own(tmp_path, test_files=4), jobs=3)
    own = harness.pytest_runs(ADMITTED)[1][0]
    assert own[own.index("-n") + 1] == "3", "--jobs decides"
    monkeypatch.setattr(compat_cell.os, "cpu_count", lambda: 1)
    harness.run_cell(ADMITTED, own=harness.own(tmp_path, test_files=40))
    assert "-n" not in harness.pytest_runs(ADMITTED)[1][0]


def test_without_own_tests_only_the_compat_suite_runs(harness: Harness) -> None:
    result = harness.run_cell(ADMITTED)
    assert result.ok and result.frontend_tests is None and len(harness.pytest_runs(ADMITTED)) == 1


def test_without_a_compat_suite_only_the_own_tests_run(harness: Harness, tmp_path: Path) -> None:
    result = harness.run_cell(ADMITTED, suite=None, own=harness.own(tmp_path))
    assert result.ok and result.tests == suites.TestCounts() and result.frontend_tests == suites.TestCounts(passed=1)
    ((args, cwd),) = harness.pytest_runs(ADMITTED)
    assert cwd == str(tmp_path / "staged")


def test_options_make_paths_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    options = Options(workdir=Path("build/compat"), suite=Path("suite"))
    assert options.workdir == tmp_path / "build" / "compat" and options.suite == tmp_path / "suite"


def test_the_real_probes_against_a_fake_site(harness: Harness, site: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cell driver itself, run by this interpreter: the guard and the import, as the runner reads them."""
    site.jax("0.10.2", "0.10.1")
    site.write("jax/__init__.py", "import sys\n__version__ = '0.10.2'\nclass Cpu:\n    platform = 'cpu'\n"
                                  "    def __str__(self):\n        return 'cpu:0'\ndef devices():\n    return [Cpu()]\n"
                                  "print('Plugin error: calling initialize()', file=sys.stderr)\n"
                                  "print('Traceback (most recent call last):', file=sys.stderr)\n"
                                  "print('  File x.py, line 1', file=sys.stderr)\n"
                                  "print('RuntimeError: plugin cuda failed to load', file=sys.stderr)\n")
    site.write("jax/numpy.py", "import warnings\nclass _A:\n    def sum(self):\n        return 3.0\n"
                               "def ones(n):\n    for _ in range(7):\n"
                               "        warnings.warn('old jaxlib', RuntimeWarning)\n"
                               "    warnings.warn('old jaxlib', RuntimeWarning)\n    return _A()\n")
    site.jaxlib("0.10.0")
    (harness.workdir / "envs").mkdir(parents=True)
    for cell in (BELOW, ADMITTED):  # the cells' environments are the fake site (the probe's file lies inside)
        (harness.workdir / "envs" / cell.id).symlink_to(site.root)
    monkeypatch.setattr(installed, "read_environment", lambda family, python=None: REAL_INSPECT(family, path=site.path))
    for cell in (BELOW, ADMITTED):
        harness.scripts[cell.id] = Script(site=site.path)
    refused = harness.run_cell(BELOW)
    assert refused.ok and refused.observed == "refused", refused.problems
    assert refused.guard_fix == FIX and "JAXREL_SKIP_GUARD" in str(refused.guard_message)
    # each warning once (#13: the probe showed one warning seven times), the file it came from, what it printed
    assert refused.frontend_import == {"version": "0.10.2", "file": str(site.root / "jax" / "__init__.py"),
                                       "sum": 3.0, "devices": ["cpu:0"], "platforms": ["cpu"],
                                       "warnings": ["old jaxlib"]}
    assert refused.import_output == "Plugin error: calling initialize(): RuntimeError: plugin cuda failed to load"
    assert refused.backend_api["xla_ffi_api"] == "0.3"
    site.jaxlib("0.10.2")
    (site.root / "jaxlib-0.10.0.dist-info" / "METADATA").unlink()
    (site.root / "jaxlib-0.10.0.dist-info").rmdir()
    accepted = harness.run_cell(ADMITTED, suite=None)  # the compat suite wants a real jax
    assert accepted.ok and accepted.observed == "accepted", accepted.problems
    assert accepted.frontend_import is not None and accepted.frontend_import["platforms"] == ["cpu"]


FAKE_NUMPY = "class _A:\n    def sum(self):\n        return 3.0\ndef ones(n):\n    return _A()\n"  # the smoke code's


def _passing_suite(root: Path, tests: dict[str, str]) -> Path:
    """A compat suite at ``root``: each file (name → its one test's name) holds a test that passes."""
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, test in tests.items():
        (root / name).write_text(f"def {test}():\n    pass\n")
    return root


def test_the_real_driver_runs_the_plugin_tests_alone_when_it_sees_only_the_cpu(
        harness: Harness, site: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The driver decides after the import, from the platforms the frontend lists."""
    site.jax("0.10.2", "0.10.1")
    site.jaxlib("0.10.2")
    for name in ("jax-cuda12-plugin", "jax-cuda12-pjrt"):
        site.distribution(name, "0.10.2")
    platform = site.write("jax/platform.txt", "cpu")
    site.write("jax/__init__.py", "import pathlib\n__version__ = '0.10.2'\nclass Device:\n"
                                  "    platform = (pathlib.Path(__file__).parent / 'platform.txt').read_text()\n"
                                  "    def __str__(self):\n        return self.platform + ':0'\n"
                                  "def devices():\n    return [Device()]\n")
    site.write("jax/numpy.py", FAKE_NUMPY)
    suite = _passing_suite(tmp_path / "suite", {suites.PLUGIN_TESTS: "test_plugin", "test_other.py": "test_other"})
    (harness.workdir / "envs").mkdir(parents=True)
    (harness.workdir / "envs" / PLUGINS.id).symlink_to(site.root)
    monkeypatch.setattr(installed, "read_environment", lambda family, python=None: REAL_INSPECT(family, path=site.path))
    harness.scripts[PLUGINS.id] = Script(site=site.path)
    alone = harness.run_cell(PLUGINS, suite=suite, cpu_twin=ADMITTED.id)
    assert alone.ok and alone.cpu_suite_in == ADMITTED.id, alone.problems
    assert list(alone.outcomes) == ["test_plugins.py::test_plugin"]
    platform.write_text("gpu")  # its device is here: everything runs
    everything = harness.run_cell(PLUGINS, suite=suite, cpu_twin=ADMITTED.id)
    assert everything.ok and everything.cpu_suite_in is None, everything.problems
    assert sorted(everything.outcomes) == ["test_other.py::test_other", "test_plugins.py::test_plugin"]


def test_a_crash_in_the_interpreters_exit_fails_the_cell_naming_the_signal(
        harness: Harness, site: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Everything passed, then the backend's teardown killed the interpreter: users' programs would die so at exit
    (before, the driver's status after its answer was not read). A clean exit stays ok."""
    site.jax("0.10.2", "0.10.1")
    site.jaxlib("0.10.2")
    crash = site.write("jax/crash.txt", "")
    site.write("jax/__init__.py", "import atexit, os, pathlib, signal\n__version__ = '0.10.2'\n"
                                  "def _teardown():\n"
                                  "    if (pathlib.Path(__file__).parent / 'crash.txt').read_text():\n"
                                  "        os.kill(os.getpid(), signal.SIGSEGV)\n"
                                  "atexit.register(_teardown)\n"
                                  "class Cpu:\n    platform = 'cpu'\n    def __str__(self):\n        return 'cpu:0'\n"
                                  "def devices():\n    return [Cpu()]\n")
    site.write("jax/numpy.py", FAKE_NUMPY)
    suite = _passing_suite(tmp_path / "suite", {"test_one.py": "test_one"})
    (harness.workdir / "envs").mkdir(parents=True)
    (harness.workdir / "envs" / ADMITTED.id).symlink_to(site.root)
    monkeypatch.setattr(installed, "read_environment", lambda family, python=None: REAL_INSPECT(family, path=site.path))
    harness.scripts[ADMITTED.id] = Script(site=site.path)
    clean = harness.run_cell(ADMITTED, suite=suite)
    assert clean.ok and clean.problems == [] and clean.outcomes == {"test_one.py::test_one": "passed"}, clean.problems
    crash.write_text("yes")
    crashed = harness.run_cell(ADMITTED, suite=suite)
    assert crashed.observed == "accepted" and crashed.outcomes == {"test_one.py::test_one": "passed"}
    assert not crashed.ok and len(crashed.problems) == 1, crashed.problems
    assert crashed.problems[0].startswith("the interpreter was killed by SIGSEGV (signal 11) in its exit, after the "
                                          "cell's work was done"), crashed.problems


JAX_PLUGIN_STDERR = """\
I0000 00:00:1795407629.581548   19899 cudart_stub.cc:31] Could not find cuda drivers on your machine.
/env/site-packages/jaxlib/plugin_support.py:114: RuntimeWarning: JAX plugin jax_cuda12_plugin version 0.11.0 ...
  warnings.warn(
Jax plugin configuration error: Exception when calling jax_plugins.xla_cuda12.initialize()
Traceback (most recent call last):
  File "/env/site-packages/jax_plugins/xla_cuda12/__init__.py", line 201, in _version_check
RuntimeError: jaxlib/cuda/versions_helpers.cc:38: operation cudaRuntimeGetVersion(&version) failed

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/env/site-packages/jax/_src/xla_bridge.py", line 495, in discover_pjrt_plugins
  File "/env/site-packages/jax_plugins/xla_cuda12/__init__.py", line 205, in _version_check
RuntimeError: Unable to load CUDA. Is it installed?
I0000 00:00:1795407629.612932   19899 cudart_stub.cc:31] Could not find cuda drivers on your machine.
"""


def test_a_traceback_printed_while_importing_is_summed_up() -> None:
    """#13: real jax with a mismatched CUDA plugin warns once, then logs a traceback the report omitted."""
    assert probes.traceback_summary(JAX_PLUGIN_STDERR) == (
        "Jax plugin configuration error: Exception when calling jax_plugins.xla_cuda12.initialize(): "
        "RuntimeError: Unable to load CUDA. Is it installed?")
    assert probes.traceback_summary("just a warning\n") is None
    assert probes.traceback_summary("Traceback (most recent call last):\n  File x\nValueError: v\n") == "ValueError: v"


def test_a_missing_record_reads_as_nothing_recorded(tmp_path: Path) -> None:
    """Changed by #13: counts come from the cell plugin's record (node ids), not from junit."""
    assert suites.read_record(tmp_path / "none") == ({}, [], False)


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
    results = compat_run.run(matrix(ADMITTED, BELOW, PLUGINS, NEWER), FAMILY, harness.front, harness.options())
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
        compat_run.run(matrix(ADMITTED), FAMILY, harness.front, harness.options(suite=tmp_path))


def test_run_checkpoints_after_each_cell(harness: Harness) -> None:
    seen: list[list[str]] = []
    compat_run.run(matrix(ADMITTED, BELOW), FAMILY, harness.front,
               harness.options(checkpoint=lambda results: seen.append([r.cell.id for r in results])))
    assert seen == [[ADMITTED.id], [ADMITTED.id, BELOW.id]]


def test_cells_run_side_by_side_and_come_back_in_the_matrixs_order(harness: Harness,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cells at once: both are inside the compat suite together (a barrier only two threads pass),
    and the results, the checkpoints and the triage see the matrix's order, not the finishing order."""
    import threading

    together = threading.Barrier(2, timeout=10)
    real_run = FakeEnv.run

    def meeting_run(self: FakeEnv, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if args[1:3] == ("-m", "pytest") and self.root.name in (ADMITTED.id, OLDER.id):
            together.wait()  # raises BrokenBarrierError unless the other cell is running too
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(FakeEnv, "run", meeting_run)
    harness.scripts[BELOW.id] = Script(guard=(0, REFUSED, ""))
    seen: list[list[str]] = []
    order = [ADMITTED.id, BELOW.id, OLDER.id]
    results = compat_run.run(matrix(ADMITTED, BELOW, OLDER), FAMILY, harness.front,
                         harness.options(cells_at_once=2, checkpoint=lambda rs: seen.append([r.cell.id for r in rs])))
    assert [r.cell.id for r in results] == order and all(r.ok for r in results)
    assert results[0].tests.passed == results[2].tests.passed == 2 and results[1].observed == "refused"
    assert len(seen) == 3 and seen[-1] == order
    assert all(ids == sorted(ids, key=order.index) for ids in seen)


def test_one_cell_at_a_time_when_own_tests_use_the_cores(harness: Harness, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat_run, "workers", lambda: 2)
    assert compat_run.cells_at_once(harness.options(cells_at_once=None)) == 2
    assert compat_run.cells_at_once(harness.options(cells_at_once=None, own=harness.own(tmp_path))) == 1
    assert compat_run.cells_at_once(harness.options(cells_at_once=3, own=harness.own(tmp_path))) == 3
    monkeypatch.setattr(compat_run, "workers", lambda: 1)
    assert compat_run.cells_at_once(harness.options(cells_at_once=None)) == 1


def test_side_by_side_cells_install_wheels_downloaded_before_they_start(harness: Harness, tmp_path: Path) -> None:
    """With cells side by side, every backend file not yet here is fetched and verified first, one at a time;
    files already here are verified by the cells that install them."""
    from jaxrel.distributions.index import Index

    house = tmp_path / "wheelhouse"
    house.mkdir()
    for version in ("0.10.1", "0.10.2"):
        (house / f"jaxlib-{version}-py3-none-any.whl").write_bytes(version.encode())
    index = Index([], [house], cache=tmp_path / "cache")
    fetched: list[str] = []
    original = index.download
    index.download = lambda file: fetched.append(file.filename) or original(file)  # type: ignore[method-assign]
    cells = matrix(ADMITTED, OLDER)
    results = compat_run.run(cells, FAMILY, harness.front, harness.options(cells_at_once=2, index=index))
    assert sorted(fetched) == ["jaxlib-0.10.1-py3-none-any.whl", "jaxlib-0.10.2-py3-none-any.whl"], \
        "both here already: each verified once, by its cell"
    assert [r.cell.id for r in results] == [ADMITTED.id, OLDER.id] and all(r.ok for r in results)
    fetched.clear()
    index.has = lambda file: False  # type: ignore[method-assign]  # as with an empty cache
    compat_run.run(cells, FAMILY, harness.front, harness.options(cells_at_once=2, index=index))
    assert fetched[:2] == ["jaxlib-0.10.1-py3-none-any.whl", "jaxlib-0.10.2-py3-none-any.whl"], "in order, first"
    assert len(fetched) == 4


# -- the triage of failed tests ---------------------------------------------------------------------

OWN = "tests/api_test.py"


def two_cells(harness: Harness, older: list[Case], newest: list[Case], rerun: dict[str, str] | None = None) -> None:
    """OLDER (jaxlib 0.10.1) and ADMITTED (0.10.2, the newest admitted: the reference) with these own tests."""
    harness.scripts[OLDER.id] = Script(own=(1, "F\n"), own_cases=older, rerun=rerun or {})
    harness.scripts[ADMITTED.id] = Script(own=(1 if any("fail" in o for *_, o in newest) else 0, ".\n"),
                                          own_cases=newest)


def verdicts(result: compat_cell.CellResult) -> dict[str, tuple[str, str]]:
    return {f.test: (f.verdict, f.detail) for f in result.failures}


def test_triage_tells_regressions_frontend_failures_and_flaky_tests_apart(harness: Harness, tmp_path: Path) -> None:
    two_cells(harness,
              older=[(OWN, "test_new_api", "failed: AttributeError: jaxlib has no new_api"),
                     (OWN, "test_flaky", "failed: TimeoutError"), (OWN, "test_broken", "failed: assert 2 == 3"),
                     (OWN, "test_fine", "passed")],
              newest=[(OWN, "test_new_api", "passed"), (OWN, "test_flaky", "passed"),
                      (OWN, "test_broken", "failed: assert 2 == 3"), (OWN, "test_fine", "passed")],
              rerun={f"{OWN}::test_flaky": "passed"})
    older, newest = compat_run.run(matrix(OLDER, ADMITTED), FAMILY, harness.front,
                               harness.options(suite=None, own=harness.own(tmp_path)))
    assert verdicts(older) == {
        f"{OWN}::test_new_api": ("compat regression", "passes on jaxlib 0.10.2, fails on jaxlib 0.10.1"),
        f"{OWN}::test_flaky": ("flaky", "passed when rerun on the same cell"),
        f"{OWN}::test_broken": ("frontend failure", "fails on jaxlib 0.10.2 too: assert 2 == 3")}
    assert verdicts(newest) == {f"{OWN}::test_broken": (
        "frontend failure", "fails on the newest admitted backend (jaxlib 0.10.2) itself")}
    assert not older.ok and newest.ok, "a compat regression fails the cell; a frontend failure does not"
    assert older.problems == [] and older.verdicts() == {"compat regression": 1, "flaky": 1, "frontend failure": 1}
    # reruns: the three failures on their own cell, the two confirmed ones on the newest backend, only those
    reruns = [v for v in harness.envs[OLDER.id].variables if records.ONLY in v]
    assert len(reruns) == 1 and Path(reruns[0][records.ONLY]).read_text().split() == [
        f"{OWN}::test_new_api", f"{OWN}::test_flaky", f"{OWN}::test_broken"]
    there = [Path(v[records.ONLY]).read_text().split() for v in harness.envs[ADMITTED.id].variables
             if records.ONLY in v]
    assert there == [[f"{OWN}::test_broken"], [f"{OWN}::test_broken", f"{OWN}::test_new_api"]]
    assert "triage" in older.timings
    assert (f"triage: {OLDER.id}: 1 compat regression (own tests {OWN}::test_new_api: AttributeError: jaxlib has "
            "no new_api), 1 frontend failure, 1 flaky · FAILED") in harness.progress
    assert f"triage: {ADMITTED.id}: 1 frontend failure · ok" in harness.progress
    # the verdicts' junit: one test suite per verdict; only the regression is a junit failure
    suites_by_name = {s.get("name"): s for s in harness.verdicts(OLDER).iter("testsuite")}
    assert sorted(suites_by_name) == [f"compat.{OLDER.id}.{v}" for v in ("compat-regression", "flaky",
                                                                          "frontend-failure")]
    regression = suites_by_name[f"compat.{OLDER.id}.compat-regression"]
    assert regression.get("failures") == "1" and regression.find(".//failure") is not None
    assert suites_by_name[f"compat.{OLDER.id}.flaky"].find(".//failure") is None


def test_a_collection_error_everywhere_fails_the_run_with_its_cause(harness: Harness, tmp_path: Path) -> None:
    missing = "error: collection: ModuleNotFoundError: No module named 'absl'"
    two_cells(harness, older=[(OWN, "", missing)], newest=[(OWN, "", missing)])
    older, newest = compat_run.run(matrix(OLDER, ADMITTED), FAMILY, harness.front,
                               harness.options(suite=None, own=harness.own(tmp_path)))
    for result in (older, newest):
        assert not result.ok and [f.verdict for f in result.failures] == ["collection error"]
        assert result.failures[0].message == "collection: ModuleNotFoundError: No module named 'absl'"
    assert older.failures[0].detail == "fails on jaxlib 0.10.2 too: collection: ModuleNotFoundError: No module " \
                                       "named 'absl'"


def test_the_reference_cell_is_built_when_the_run_did_not_select_it(harness: Harness, tmp_path: Path) -> None:
    two_cells(harness, older=[(OWN, "test_new_api", "failed")], newest=[(OWN, "test_new_api", "passed")])
    (older,) = compat_run.run(matrix(OLDER, ADMITTED).select([OLDER.id]), FAMILY, harness.front,
                          harness.options(suite=None, own=harness.own(tmp_path, tmp_path / "reqs.txt")))
    assert verdicts(older) == {f"{OWN}::test_new_api": (
        "compat regression", "passes on jaxlib 0.10.2, fails on jaxlib 0.10.1")}
    assert harness.created[ADMITTED.id]["requirement_files"] == [tmp_path / "reqs.txt"]
    assert f"triage: building {ADMITTED.id}, the newest admitted backend, to rerun failures on …" in harness.progress


def test_a_failure_that_cannot_be_compared_stays_unclassified(harness: Harness, tmp_path: Path) -> None:
    two_cells(harness, older=[(OWN, "test_new_api", "failed")], newest=[])
    harness.failures[ADMITTED.id] = envs.EnvError("installing jaxlib==0.10.2 failed (exit 1): gone")
    (older,) = compat_run.run(matrix(OLDER, ADMITTED).select([OLDER.id]), FAMILY, harness.front,
                          harness.options(suite=None, own=harness.own(tmp_path)))
    assert verdicts(older) == {f"{OWN}::test_new_api": (
        "unclassified", "could not run it on jaxlib 0.10.2: installing jaxlib==0.10.2 failed (exit 1): gone")}
    assert not older.ok


def test_a_failure_the_newest_backend_skips_stays_unclassified(harness: Harness, tmp_path: Path) -> None:
    """e.g. a test needing the CUDA plugin fails on the plugin cell; the plain newest cell skips it."""
    two_cells(harness, older=[(OWN, "test_plugin", "failed")], newest=[(OWN, "test_plugin", "skipped: no plugin")])
    older, newest = compat_run.run(matrix(OLDER, ADMITTED), FAMILY, harness.front,
                               harness.options(suite=None, own=harness.own(tmp_path)))
    assert verdicts(older) == {f"{OWN}::test_plugin": (
        "unclassified", "skipped on jaxlib 0.10.2 (no plugin), so it cannot be compared")}
    assert not older.ok and newest.ok


def test_reference_for_is_the_newest_admitted_cell_of_the_same_python() -> None:
    full = matrix(OLDER, ADMITTED, PLUGINS, BELOW, NEWER)
    assert full.reference_for(OLDER) == ADMITTED and full.reference_for(PLUGINS) == ADMITTED
    assert full.select([OLDER.id]).reference_for(OLDER) == ADMITTED, "selection keeps the pool"
    assert full.reference_for(NEWER) is None, "no admitted cell on Python 3.12"


def test_extension_wheels_per_python(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert compat_run.extension_wheels(["3.11"], harness.options()) == {"3.11": "not requested (--no-extension)"}
    assert "no Bazel workspace" in str(compat_run.extension_wheels(["3.11"], harness.options(extensions=True))["3.11"])
    built = tmp_path / "rmsnorm-0.1-cp311-cp311-linux_x86_64.whl"

    asked: list[tuple[str, ...]] = []

    def build(workspace: Path, *, python: str, output: Path, bazel_options: tuple[str, ...]) -> bazel.BuildResult:
        asked.append(bazel_options)
        if python.endswith("3.12"):
            raise bazel.BuildError("bazel build failed: no toolchain")
        return bazel.BuildResult(wheels=[built], seconds=1.5, command=["bazel"])

    monkeypatch.setattr(compat_run, "python_for", lambda version: Python(version, f"/usr/bin/python{version}"))
    monkeypatch.setattr(bazel, "build", build)
    found = compat_run.extension_wheels(["3.11", "3.12"], harness.options(extensions=True, workspace=tmp_path,
                                                                          bazel_options=("--config=manylinux",)))
    assert found == {"3.11": [built], "3.12": "not built: bazel build failed: no toolchain"}
    assert asked == [("--config=manylinux",)] * 2, "every Python's build as the release builds it"
    assert f"extension: building for Python 3.11 with Bazel in {tmp_path} (--config=manylinux) …" in harness.progress
    assert f"extension: {built.name} (1.5 s)" in harness.progress
    assert "extension: not built: bazel build failed: no toolchain" in harness.progress


HERE = next(iter(packaging_tags.platform_tags()))  # a platform tag pip accepts on this machine


def test_extension_wheels_stable_abi_built_once(harness: Harness, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The oldest Python builds first; a stable-ABI wheel serves the newer ones as pip installs it, unbuilt again."""
    asked: list[str] = []

    def build(workspace: Path, *, python: str, output: Path, bazel_options: tuple[str, ...]) -> bazel.BuildResult:
        version = python.removeprefix("/usr/bin/python")
        asked.append(version)
        if version == "3.10":
            raise bazel.BuildError("bazel build failed: Python 3.10 is older than the stable ABI's floor")
        tag = "cp311-abi3" if version == "3.11" else f"cp{version.replace('.', '')}-cp{version.replace('.', '')}"
        return bazel.BuildResult(wheels=[output / f"rmsnorm-0.1-{tag}-{HERE}.whl"], seconds=1.0, command=["bazel"])

    monkeypatch.setattr(compat_run, "python_for", lambda version: Python(version, f"/usr/bin/python{version}"))
    monkeypatch.setattr(bazel, "build", build)
    found = compat_run.extension_wheels(["3.13", "3.12", "3.10", "3.11"],
                                        harness.options(extensions=True, workspace=tmp_path))
    assert asked == ["3.10", "3.11"], "3.12 and 3.13 install the cp311-abi3 wheel"
    abi3 = [harness.workdir / "extensions" / "py3.11" / f"rmsnorm-0.1-cp311-abi3-{HERE}.whl"]
    assert found["3.11"] == found["3.12"] == found["3.13"] == abi3
    assert str(found["3.10"]).startswith("not built: ")
    assert (f"extension: rmsnorm-0.1-cp311-abi3-{HERE}.whl serves Python 3.12 too (stable ABI): installed as "
            "pip would, not rebuilt") in harness.progress


def test_extension_wheels_per_python_abi_rebuilt(harness: Harness, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel of one CPython's own ABI (``cp311-cp311``) serves no other: each Python builds its own."""
    asked: list[str] = []

    def build(workspace: Path, *, python: str, output: Path, bazel_options: tuple[str, ...]) -> bazel.BuildResult:
        version = python.removeprefix("/usr/bin/python").replace(".", "")
        asked.append(version)
        return bazel.BuildResult(wheels=[output / f"rmsnorm-0.1-cp{version}-cp{version}-{HERE}.whl"],
                                 seconds=1.0, command=["bazel"])

    monkeypatch.setattr(compat_run, "python_for", lambda version: Python(version, f"/usr/bin/python{version}"))
    monkeypatch.setattr(bazel, "build", build)
    found = compat_run.extension_wheels(["3.12", "3.11"], harness.options(extensions=True, workspace=tmp_path))
    assert asked == ["311", "312"]
    assert found["3.12"] == [harness.workdir / "extensions" / "py3.12" / f"rmsnorm-0.1-cp312-cp312-{HERE}.whl"]


def test_extension_wheels_given_install_where_pip_would(harness: Harness, tmp_path: Path) -> None:
    """``--extension-wheels DIR``: each Python gets the wheels there whose tags it accepts on this machine."""
    other = "manylinux_2_27_" + ("x86_64" if platform.machine() == "aarch64" else "aarch64")
    names = [f"r-0.1-cp311-abi3-{HERE}.whl", f"r-0.1-cp311-abi3-{other}.whl", f"r-0.1-cp313-cp313-{HERE}.whl",
             "p-0.1-py3-none-any.whl"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    found = compat_run.extension_wheels(["3.10", "3.12", "3.13"],
                                        harness.options(extensions=True, workspace=tmp_path, extension_dir=tmp_path))
    assert found["3.12"] == [tmp_path / names[3], tmp_path / names[0]]
    assert found["3.13"] == [tmp_path / names[3], tmp_path / names[0], tmp_path / names[2]]
    assert found["3.10"] == [tmp_path / names[3]], "only the pure wheel installs on 3.10"
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / names[1]).write_bytes(b"")
    assert compat_run.extension_wheels(["3.12"], harness.options(extensions=True, extension_dir=lone)) == {
        "3.12": f"none of the 1 wheels in {lone} installs on Python 3.12 here"}
    assert f"extension: {names[1]} from {lone}, built beforehand" in harness.progress


# -- the report -------------------------------------------------------------------------------------


@pytest.fixture
def results(harness: Harness, tmp_path: Path) -> list[compat_cell.CellResult]:
    """Four cells as a run leaves them: green, refused as expected, failed suite (triaged), wrong verdict."""
    harness.scripts[BELOW.id] = Script(guard=(0, REFUSED, ""), probe=(1, "", "RuntimeError: jaxlib version too old\n"))
    harness.scripts[PLUGINS.id] = Script(suite=(1, PYTEST_FAILED),
                                         cases=[("test_ffi.py", "test_call", "failed: assert 1 == 2"), *PASSING[1:],
                                                ("test_shard_map.py", "test_mesh", "error: RuntimeError")])
    harness.scripts[ADMITTED.id] = Script(cases=[*PASSING, ("test_shard_map.py", "test_mesh", "error: RuntimeError")])
    extension = [tmp_path / "rmsnorm-0.1-cp311-cp311-linux_x86_64.whl"]
    own = harness.own(tmp_path)
    results = [harness.run_cell(ADMITTED, extension, own=own), harness.run_cell(BELOW, "not requested", own=own),
               harness.run_cell(PLUGINS, extension, own=own), harness.run_cell(NEWER, own=own)]
    compat_run.triage(matrix(ADMITTED, BELOW, PLUGINS, NEWER), FAMILY, harness.front, tmp_path / "jaxrel.whl",
                  harness.options(own=own), {}, results)
    return results


def test_report_table_and_summary(results: list[compat_cell.CellResult]) -> None:
    lines = report.table(results).splitlines()
    assert lines[0].split() == ["cell", "expected", "observed", "passed", "failed", "skipped", "own", "tests",
                                "failed", "tests", "extension", "time", "result"]
    assert set(lines[1]) == {"-", " "} and len(lines) == 6
    assert lines[2].startswith(ADMITTED.id) and lines[2].endswith("  ok")
    assert "1 passed, 0 failed, 0 skipped" in lines[2] and "1/1 passed" in lines[2]
    assert "refused (backend-at-least-minimum)" in lines[3] and lines[3].endswith("  ok")
    assert lines[4].endswith("FAILED") and lines[5].endswith("FAILED")
    observed = lines[0].index("observed")  # the columns line up
    assert [line[observed:].split()[0] for line in lines[2:]] == ["accepted", "refused", "accepted", "accepted"]
    verdicts = lines[0].index("failed tests")  # the failed tests, kept apart by verdict
    assert [line[verdicts:verdicts + 39].strip() for line in lines[2:]] == [
        "1 frontend failure", "–", "1 compat regression, 1 frontend failure", "–"]
    assert report.summary(results) == (
        f"4 cells (2 positive, 2 negative): 2 as expected, 2 FAILED: {PLUGINS.id}, {NEWER.id}\n"
        "failed tests: 1 compat regression (fails the run), 2 frontend failures\n"
        "extension: not requested\nextension: rmsnorm-0.1-cp311-cp311-linux_x86_64.whl")  # wheels, or why none
    assert report.summary(results[1:2]).startswith("1 cell (0 positive, 1 negative): 1 as expected\n")
    assert "own tests" not in report.table(results[1:2]), "the column only when a cell ran them"
    assert "failed tests" not in report.table(results[1:2]), "the column only when a cell has failed tests"


def test_report_markdown(results: list[compat_cell.CellResult]) -> None:
    text = report.markdown(matrix(ADMITTED, BELOW, PLUGINS, NEWER), results)
    assert text.startswith("# compat: jax 0.10.2\n\nFrontend: wheel jax-0.10.2-py3-none-any.whl; minimum jaxlib "
                           "0.10.1; declared range >=0.10.1,<=0.10.2.\n")
    assert (f"| `{ADMITTED.id}` | accepted | accepted | 2 | 1 | 1 | 1 passed, 0 failed, 0 skipped | "
            "1 frontend failure | 1/1 passed |") in text
    assert "- no Python 3.13 wheels of jaxlib 0.10.0" in text
    assert (f"- `{BELOW.id}`: jaxlib is version 0.10.0; jax 0.10.2 needs 0.10.1 <= jaxlib <= 0.10.2. Fix: {FIX} — "
            "real jax without the guard: RuntimeError: jaxlib version too old") in text
    assert "| cell | ifrt_version | jaxlib_extension_version | xla_ffi_api |" in text
    assert f"| `{ADMITTED.id}` | – | 467 | 0.3 |" in text
    assert f"| test | `{ADMITTED.id}` | `{PLUGINS.id}` |" in text
    # #13: rows are named by node id, module included (two modules may hold tests of one name)
    assert "| `test_ffi.py::test_call` | ✓ | ✗ failed |" in text
    assert "| `test_shard_map.py::test_mesh` | ✗ error | ✗ error |" in text
    assert "| `test_plugins.py::test_cuda` | skip: no GPU / none found | skip: no GPU / none found |" in text
    assert "## Failed tests" in text
    assert (f"| `{PLUGINS.id}` | compat suite | `test_ffi.py::test_call` | compat regression | passes on jaxlib "
            "0.10.2, fails on jaxlib 0.10.2 with plugins | assert 1 == 2 |") in text
    assert (f"| `{ADMITTED.id}` | compat suite | `test_shard_map.py::test_mesh` | frontend failure | fails on the "
            "newest admitted backend (jaxlib 0.10.2) itself | RuntimeError |") in text
    failed = text[text.index("## Failed tests"):]
    assert failed.index("| compat regression |") < failed.index("| frontend failure |"), "regressions first"
    assert f"- `{NEWER.id}`: expected refused, the guard accepted it" in text
    assert "INCOMPLETE" not in text
    assert text.endswith("\n")
    assert "only the plugin tests ran" not in text
    results[2].cpu_suite_in = ADMITTED.id
    assert (f"– in `{PLUGINS.id}`: not run there; the frontend saw only CPU devices, so only the plugin tests ran "
            f"(the rest ran in `{ADMITTED.id}`).") in report.markdown(matrix(ADMITTED, BELOW, PLUGINS, NEWER), results)


def test_report_of_a_run_that_stopped_is_marked_incomplete(results: list[compat_cell.CellResult],
                                                           tmp_path: Path) -> None:
    the_matrix = matrix(ADMITTED, BELOW, PLUGINS, NEWER)
    json_path, md_path = report.write(tmp_path, the_matrix, results[:2], complete=False)
    data = json.loads(json_path.read_text())
    assert data["complete"] is False and data["ok"] is False, "two green cells of four prove nothing"
    assert data["summary"].startswith("INCOMPLETE: the run stopped after 2 of 4 cells")
    assert "**INCOMPLETE: the run stopped after 2 of 4 cells" in md_path.read_text()


def test_report_clear_removes_an_earlier_runs_reports(tmp_path: Path) -> None:
    (tmp_path / "junit").mkdir()
    for name in ("report.json", "report.md", "junit/cell.xml", "keep.txt"):
        (tmp_path / name).write_text("old")
    report.clear(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    report.clear(tmp_path / "nothing-here")


def test_report_json_and_write(results: list[compat_cell.CellResult], tmp_path: Path) -> None:
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


def test_report_write_is_all_or_nothing(results: list[compat_cell.CellResult], tmp_path: Path,
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
    from jaxrel.distributions.index import Index

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

    from jaxrel.distributions.index import Index

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


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", '{"a": 1, "a": 2}', "[" * 100_000])
def test_a_damaged_driver_answer_is_dropped_not_trusted(tmp_path: Path, text: str) -> None:
    from jaxrel.cells.driver import _answer
    answer = tmp_path / "out.json"
    answer.write_text(text)
    assert _answer(answer) is None
    assert _answer(tmp_path / "missing.json") is None
    answer.write_text('{"guard": {"accepted": true}}')
    assert _answer(answer) == {"guard": {"accepted": True}}
