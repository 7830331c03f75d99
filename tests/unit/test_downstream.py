"""``jaxrel downstream``'s parts without an index: the search's cell count and answers, the Crater's classification
and grouping, the sandbox's environment and budget, a library's requirements read through packaging."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from packaging.version import Version

from jaxrel.cells import records
from jaxrel.cells.admitted import admitted_backends
from jaxrel.downstream import cellrun, crater, report, sandbox
from jaxrel.downstream.cellrun import CellResult, CellSpec, resolver_cause, unsatisfiable
from jaxrel.downstream.library import Library, LibraryError, from_checkout, parse_library_spec
from jaxrel.downstream.minimum import Candidate, MinimumResult, era, search
from jaxrel.downstream.run import LibraryLine, library_line
from jaxrel.downstream.testsource import find_tests, staged_path, tag_candidates
from jaxrel.errors import BadInput
from jaxrel.family import resolve_family

JAX = resolve_family(None)


def _candidates(count: int, uploaded_every_days: int = 30) -> list[Candidate]:
    found = []
    for i in range(count):
        day = 1 + i * uploaded_every_days
        found.append(Candidate(Version(f"0.4.{i}"), [Version(f"0.4.{max(0, i - 1)}"), Version(f"0.4.{i}")],
                               {"library": "2030-01-01T00:00:00Z",
                                "frontend": f"{2024 + day // 365}-{1 + (day % 365) // 31:02d}-01T00:00:00Z"}))
    return found


def _runner(minimum: int, calls: list[tuple[str, str, str]]) -> object:
    def run(spec: CellSpec, role: str) -> CellResult:
        calls.append((spec.frontend, spec.backend, role))
        ok = Version(spec.frontend) >= Version(f"0.4.{minimum}")
        return CellResult(spec.frontend, spec.backend, "passed" if ok else "failed",
                          failing=[] if ok else ["tests/test_x.py::test_new_api"],
                          first_error="" if ok else "AttributeError: module 'jax' has no attribute 'new_api'")
    return run


@pytest.mark.parametrize("true_minimum", [0, 1, 7, 15, 22, 28, 29])
def test_a_search_over_30_releases_takes_at_most_7_cells_and_finds_the_minimum(true_minimum: int) -> None:
    calls: list[tuple[str, str, str]] = []
    result = MinimumResult("lib", "1.0", "3.12", "jax", "0.4.0", "sdist")
    search(result, _candidates(30), _runner(true_minimum, calls))  # type: ignore[arg-type]
    assert result.true_minimum == f"0.4.{true_minimum}"
    assert len(calls) <= 7, calls
    if true_minimum:  # the boundary tested on both sides, and the fix names it
        assert (f"0.4.{true_minimum - 1}", "failed") in {(c.jax, c.outcome) for c in result.cells}
        assert result.fix == f"jax>=0.4.{true_minimum}"
        assert result.highest_failing is not None and result.highest_failing.jax == f"0.4.{true_minimum - 1}"
    else:
        assert result.fix is None
    assert ("confirm" in {role for _, _, role in calls}) == (true_minimum > 0)  # the newest backend too


def test_a_lower_release_its_own_requirements_rule_out_makes_the_declared_minimum_false() -> None:
    calls: list[tuple[str, str, str]] = []
    inner = _runner(0, calls)

    def run(spec: CellSpec, role: str) -> CellResult:
        if Version(spec.frontend) < Version("0.4.3"):
            return CellResult(spec.frontend, spec.backend, "not-installable",
                              reason="Because lineax>=0.0.5 depends on jax>=0.4.3 and lib>=1.0 depends on "
                                     "lineax>=0.0.5")
        return inner(spec, role)

    result = MinimumResult("lib", "1.0", "3.12", "jax", "0.4.0", "sdist")
    search(result, _candidates(8), run)
    assert (result.true_minimum, result.fix) == ("0.4.3", "jax>=0.4.3")
    assert result.highest_failing is not None and result.highest_failing.jax == "0.4.2"


def test_sweep_runs_every_release_with_both_backends() -> None:
    calls: list[tuple[str, str, str]] = []
    result = MinimumResult("lib", "1.0", "3.12", "jax", None, "sdist")
    search(result, _candidates(6), _runner(3, calls), sweep=True)  # type: ignore[arg-type]
    assert len(calls) == 11  # 0.4.0 has one backend; the five others two
    assert result.true_minimum == "0.4.3"


def test_the_anchor_is_the_release_of_the_librarys_own_time() -> None:
    calls: list[tuple[str, str, str]] = []
    found = _candidates(10)
    result = MinimumResult("lib", "1.0", "3.12", "jax", None, "sdist", uploaded=found[4].uploaded["frontend"])
    search(result, found, _runner(2, calls))  # type: ignore[arg-type]
    assert calls[0][0] == "0.4.4"  # what it was developed against, first
    assert result.true_minimum == "0.4.2"


def test_a_library_failing_with_the_frontend_of_its_time_has_no_minimum() -> None:
    calls: list[tuple[str, str, str]] = []
    result = MinimumResult("lib", "1.0", "3.12", "jax", None, "sdist")
    search(result, _candidates(8), _runner(99, calls))  # type: ignore[arg-type]
    assert result.true_minimum is None and len(calls) == 1
    assert "the frontend of its own time (0.4.7) fails with it" in result.notes[0]


def test_not_installable_and_infra_cells_are_dropped_and_the_search_goes_on() -> None:
    calls: list[tuple[str, str, str]] = []
    inner = _runner(5, calls)

    def run(spec: CellSpec, role: str) -> CellResult:
        if spec.frontend in ("0.4.4", "0.4.7"):
            calls.append((spec.frontend, spec.backend, role))
            outcome = "infra" if spec.frontend == "0.4.7" else "not-installable"
            return CellResult(spec.frontend, spec.backend, outcome, reason="error: No solution found")
        return inner(spec, role)  # type: ignore[operator, no-any-return]

    found = _candidates(12)
    found[1].problem = "no jaxlib it admits has a wheel for Python 3.12 here"
    result = MinimumResult("lib", "1.0", "3.12", "jax", None, "sdist")
    search(result, found, run)
    assert result.true_minimum == "0.4.5"
    assert {v for v, _ in result.not_installable} == {"0.4.1", "0.4.4"}


def test_admitted_backends_follow_the_family_minimum_and_never_exceed_the_frontend() -> None:
    old = admitted_backends(JAX, Version("0.4.27"), ("jaxlib ==0.4.27 ; extra == 'cpu'",))
    assert old.contains("0.4.23") and old.contains("0.4.27") and not old.contains("0.4.22")
    assert not old.contains("0.4.28")
    new = admitted_backends(JAX, Version("0.7.0"), ("jaxlib<=0.7.0,>=0.7.0",))
    assert list(new.filter(["0.6.2", "0.7.0", "0.7.1"])) == ["0.7.0"]


def test_a_revision_admits_by_its_version_file_and_its_release_numbers() -> None:
    """A main-line build of jax before the pin (0.4.30's era): no Requires-Dist on jaxlib, the minimum in its
    version file, never newer than its own release numbers (jaxlib 0.4.31 for jax 0.4.31.dev…, not 0.10.2)."""
    dev = admitted_backends(JAX, Version("0.4.31.dev20240701+g1234abcd"), (), declared_minimum="0.4.27")
    assert list(dev.filter(["0.4.26", "0.4.27", "0.4.30", "0.4.31", "0.4.32", "0.10.2"])) == ["0.4.27", "0.4.30",
                                                                                             "0.4.31"]


def test_era_is_the_latest_upload_plus_a_second() -> None:
    assert era("2024-07-09T14:01:50Z", None, "2023-01-01T00:00:00Z") == "2024-07-09T14:01:51Z"
    assert era(None, "") is None


def _cell(outcome: str, failing: tuple[str, ...] = (), error: str = "", flaky: tuple[str, ...] = (),
          reason: str = "", passed: int = 3) -> CellResult:
    return CellResult("v", "b", outcome, reason=reason, failing=list(failing),
                      errors={t: error for t in failing}, first_error=error, flaky=list(flaky), passed=passed)


@pytest.mark.parametrize(("base", "cand", "outcome"), [
    (_cell("passed"), _cell("passed"), "test-pass"),
    (_cell("passed"), _cell("failed", ("t.py::a",), "AttributeError: x"), "regressed"),
    (_cell("failed", ("t.py::a",), "E"), _cell("passed"), "fixed"),
    (_cell("failed", ("t.py::a",), "AssertionError"), _cell("failed", ("t.py::a",), "AssertionError"), "test-fail"),
    (_cell("failed", ("t.py",), "ImportError: no", passed=0), _cell("failed", ("t.py",), "ImportError: no", passed=0),
     "broken"),
    # blackjax 1.2.5 on jax 0.6.2 and 0.7.0: one module does not import (jaxopt's DeprecationWarning as an error), 29
    # tests pass on both: the library imports, so the same failure on both is test-fail, not broken
    (_cell("failed", ("t.py",), "DeprecationWarning: no", passed=29),
     _cell("failed", ("t.py",), "DeprecationWarning: no", passed=29), "test-fail"),
    (_cell("passed"), _cell("passed", flaky=("t.py::a",)), "spurious"),
    (_cell("passed"), _cell("infra", reason="timeout: the tests ran past the 20 s budget"), "spurious"),
    (_cell("not-installable", reason="No solution found"), _cell("infra"), "broken"),
])
def test_crater_outcomes(base: CellResult, cand: CellResult, outcome: str) -> None:
    assert crater.classify(base, cand)[0] == outcome


def test_one_removal_breaking_several_libraries_is_one_group() -> None:
    removed = "AttributeError: module 'jax.core' has no attribute 'pp_eqn_rules'"
    verdicts = []
    for name, error in (("a", removed), ("b", "TypeError: f() got an unexpected keyword 'x'"), ("c", removed)):
        outcome, reason, failing, signature = crater.classify(_cell("passed"), _cell("failed", ("t::x",), error))
        verdicts.append(crater.LibraryVerdict(name, "1", outcome, reason, failing=failing, signature=signature))
    crater.group(verdicts)
    assert [v.group for v in verdicts] == ["G1", "G2", "G1"]


def test_a_module_that_does_not_compile_is_named_by_its_exception_not_by_where() -> None:
    """blackjax 1.2.2's tests on jax 0.4.30: jaxopt 0.8.3's osqp.py does not compile with warnings as errors (an
    invalid escape sequence in a docstring); pytest shows where first.
    The report said 'File ".../osqp.py", line 299'; the cause is the exception line."""
    longrepr = ("ImportError while importing test module '/w/tests/mcmc/test_integrators.py'.\n"
                "Traceback:\n/w/tests/mcmc/test_integrators.py:9: in <module>\n    import blackjax\n"
                'E     File "/env/lib/python3.11/site-packages/jaxopt/_src/osqp.py", line 299\n'
                'E       """Operator Splitting Solver for Quadratic Programs.\n'
                "E       ^^^\n"
                "E   SyntaxError: invalid escape sequence '\\m'\n")
    assert records.first_error(longrepr) == "SyntaxError: invalid escape sequence '\\m'"
    assert records.first_error("E   assert 1 == 2\nE    +  where 1 = f()\n") == "assert 1 == 2"  # unchanged
    assert records.signature(records.first_error(longrepr)).startswith("SyntaxError")


def test_the_reports_name_each_culprit_with_its_subject_and_the_bisections_notes() -> None:
    """A release candidate's bisection crosses its release commit: the reader must learn where the backend changed."""
    note = "the backend changed at the first bad commit (jaxlib 0.6.2 at its parent, 0.7.0 there)"
    found = crater.LibraryVerdict("distrax", "0.1.5", "regressed", "1 new failing", culprit={
        "commit": "3c6903d61048" + "0" * 28, "subject": "Finalize deprecations", "steps": 10, "notes": [note]})
    failed = crater.LibraryVerdict("chex", "0.1.89", "regressed", "19 new failing",
                                   culprit={"error": "the environment could not be built"})
    result = crater.CraterResult("jax git 8bc0ae6da4f6 (jax-v0.7.0)", "8bc0ae6da4f6", "0.6.2", "3.11",
                                 [found, failed], backends=("0.6.2", "0.7.0"))
    text, markdown = report.crater_text(result), report.crater_markdown(result)
    for shown in (text, markdown):
        assert "distrax: first bad commit 3c6903d61048 Finalize deprecations (10 steps)" in shown
        assert note in shown and "chex: not bisected: the environment could not be built" in shown


def test_installed_pins_name_every_distribution_but_those_left_out() -> None:
    """The Crater's candidate environment is held to these: only the frontend and its backend may differ."""
    import importlib.metadata

    from jaxrel.distributions import envs

    pins = cellrun.installed_pins(envs.existing(Path(sys.prefix)), ("pytest", "Packaging"))
    assert f"hypothesis=={importlib.metadata.version('hypothesis')}" in pins
    assert not any(pin.lower().startswith(("pytest==", "packaging==")) for pin in pins)


def test_the_sandbox_environment_holds_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {"GITHUB_TOKEN": "ghp_planted", "PIP_INDEX_URL": "https://u:p@x/simple",
                       "AWS_SECRET_ACCESS_KEY": "k", "TWINE_PASSWORD": "p", "JAX_ENABLE_X64": "1",
                       "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "HOME": "/root"}.items():
        monkeypatch.setenv(key, value)
    env = sandbox.scrubbed_environment(tmp_path / "home")
    assert "ghp_planted" not in str(env) and "u:p@" not in str(env)
    assert env["HOME"] == str(tmp_path / "home") and env["TMPDIR"].startswith(str(tmp_path / "home"))
    assert env["JAX_ENABLE_X64"] == "1" and env["XLA_FLAGS"].startswith("--xla")


def test_the_budget_kills_the_whole_group_and_removes_the_home(tmp_path: Path) -> None:
    marker = f"sandbox-budget-{os.getpid()}"
    child = f"import subprocess, time; subprocess.Popen(['sleep', '300', '{marker}'][:2]); time.sleep(300)"
    start = time.monotonic()
    ran = sandbox.run([sys.executable, "-c", child], cwd=tmp_path, home=tmp_path / "home", budget=2)
    assert ran.timed_out and ran.returncode is None
    assert time.monotonic() - start < 60
    assert not (tmp_path / "home").exists()


def test_resolver_failures_are_told_from_others() -> None:
    failure = ("installing optax==0.2.2 jax==0.4.14 failed (exit 1): error: No solution found when resolving "
               "dependencies | cause: Because chex>=0.1.86 depends on jax>=0.4.16 and optax>=0.2.2 depends on "
               "chex>=0.1.86, we can | conclude that optax>=0.2.2 depends on jax>=0.4.16. | hint: use uv")
    assert unsatisfiable(failure)
    assert resolver_cause(failure) == ("Because chex>=0.1.86 depends on jax>=0.4.16 and optax>=0.2.2 depends on "
                                       "chex>=0.1.86, we can conclude that optax>=0.2.2 depends on jax>=0.4.16.")
    assert not unsatisfiable("error: Failed to fetch: connection reset by peer")


def test_library_specs_and_tags() -> None:
    assert parse_library_spec("Optax==0.2.3") == ("optax", "0.2.3")
    assert parse_library_spec("dm_haiku") == ("dm-haiku", None)
    with pytest.raises(LibraryError, match="PEP 440"):
        parse_library_spec("optax==latest")
    with pytest.raises(LibraryError, match="not a library"):
        parse_library_spec("not a name!")
    library = Library("optax", "0.2.3", ())
    assert tag_candidates(library) == ["v0.2.3", "0.2.3", "optax-v0.2.3", "optax-0.2.3"]


def test_a_checkout_is_read_from_its_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "MyLib"\nversion = "1.2"\ndependencies = ["jax>=0.4.20", "numpy"]\n'
        '[project.optional-dependencies]\ntest = ["pytest", "scipy>=1.10; python_version >= \'3.9\'"]\n'
        '[project.urls]\nSource = "https://github.com/me/mylib"\n')
    library = from_checkout(tmp_path, JAX, "3.12")
    assert (library.name, library.version) == ("mylib", "1.2")
    assert library.declared_minimum(JAX, "3.12") == "0.4.20"
    assert library.test_requirements("3.12", JAX) == ["pytest", "scipy>=1.10"]  # markers held, then dropped
    assert library.source_url() == "https://github.com/me/mylib"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "1"\ndependencies = ["numpy"]\n')
    with pytest.raises(LibraryError, match="does not depend on jax"):
        from_checkout(tmp_path, JAX, "3.12")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["jax>=="]\n')
    with pytest.raises(LibraryError, match="does not parse"):
        from_checkout(tmp_path, JAX, "3.12")


def test_default_tests_and_staged_paths(tmp_path: Path) -> None:
    (tmp_path / "lib" / "_src").mkdir(parents=True)
    (tmp_path / "lib" / "_src" / "core_test.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "conf_test.py").write_text("")
    assert find_tests(tmp_path) == ["lib/_src/core_test.py"]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    assert find_tests(tmp_path) == ["tests"]
    assert staged_path("lib/_src/core_test.py::T::test", {"lib"}) == "_tests_in_lib/_src/core_test.py::T::test"
    assert staged_path("tests/test_a.py", {"lib"}) == "tests/test_a.py"


def test_a_libraries_line_carries_its_tests_repository_and_budget() -> None:
    line = library_line("diffrax==0.7.0 repo=/m/diffrax budget=600 test/test_term.py test/test_misc.py")
    assert line == LibraryLine("diffrax==0.7.0", "/m/diffrax", ("test/test_term.py", "test/test_misc.py"), 600.0)
    assert library_line("optax") == LibraryLine("optax")
    for bad in ("optax budget=soon", "optax budget=0", "optax budget=nan"):
        with pytest.raises(BadInput, match="budget=SECONDS"):
            library_line(bad)


def test_the_not_installable_line_names_whose_reason_it_shows() -> None:
    """Each release has its own reason; the text shows the first one's, named, not the last one's beside the first
    release (chex 0.1.90 on 3.13t showed jax 0.12's reason beside 0.4.27)."""
    result = MinimumResult("chex", "0.1.90", "3.13t", "jax", "0.4.27", "sdist")
    result.not_installable = [(f"0.4.{n}", f"no jaxlib it admits (>=0.4.{n}) has a wheel for Python 3.13t here")
                              for n in range(27, 37)] + [("0.12.0.1", "no jaxlib it admits (>=0.11.2) has a wheel")]
    text = report.minimum_text(result)
    assert ("not-installable: 0.4.27, 0.4.28, 0.4.29, 0.4.30, 0.4.31, 0.4.32, 0.4.33, 0.4.34 and 3 more (0.4.27: no "
            "jaxlib it admits (>=0.4.27) has a wheel for Python 3.13t here)") in text
    assert "0.11.2" not in text


def test_regressions_are_grouped_by_the_commit_bisect_named_across_libraries() -> None:
    """One removal, two libraries (distrax and rlax at 0.7.0: pytype_aval_mappings), another alone; the release
    issue gets one line (a checkbox) a root cause, the commit breaking the most first."""
    def regressed(name: str, commit: str, subject: str, group: str) -> crater.LibraryVerdict:
        return crater.LibraryVerdict(name, "1.0", "regressed", "new failures", group=group,
                                     culprit={"commit": commit, "subject": subject, "steps": 11})
    result = crater.CraterResult("jax at HEAD", "abc", "0.6.2", "3.12", libraries=[
        regressed("numpyro", "fc18e57b403b" + "0" * 28, "Remove pjit_p", "G1"),
        regressed("distrax", "3c6903d61048" + "0" * 28, "Remove pytype_aval_mappings", "G2"),
        regressed("rlax", "3c6903d61048" + "0" * 28, "Remove pytype_aval_mappings", "G3"),
        crater.LibraryVerdict("optax", "0.2.5", "test-pass", "80 passed on both"),
    ])
    causes = report.root_causes(result)
    assert [(c[:12], names) for c, _, names in causes] == [("3c6903d61048", ["distrax", "rlax"]),
                                                           ("fc18e57b403b", ["numpyro"])]
    markdown = report.crater_markdown(result)
    assert "- [ ] `3c6903d61048` Remove pytype_aval_mappings: 2 libraries (distrax, rlax)" in markdown
    text = report.crater_text(result)
    assert "root cause 3c6903d61048 Remove pytype_aval_mappings: 2 libraries: distrax, rlax" in text


def test_a_full_disk_is_said_first_not_past_the_tables_width() -> None:
    """The first Crater at scale filled the disk with uv's cache: the reason was uv's "Failed to extract archive:
    tensorflow-…" for 80 characters, and "No space left on device" only at its end."""
    message = ("uv pip install failed | error: Failed to extract archive: tensorflow-2.20.0-cp312-cp312-manylinux_2_17_"
               "x86_64.whl | cause: I/O operation failed during extraction | cause: failed to write to file `/root/"
               ".cache/uv/.tmp/tensorflow/libtensorflow_framework.so.2`: No space left on device (os error 28)")
    outcome, reason = cellrun.environment_failure(message)
    assert outcome == "infra" and reason.startswith("disk full: No space left on device while installing; free space")
    assert cellrun.environment_failure("uv pip install failed | error: timed out")[0] == "infra"
    unsat = ("× No solution found when resolving dependencies: | cause: Because interpax>=0.3.14 depends on jax<0.11 "
             "and you require jax==0.11.0, we can conclude that your requirements are unsatisfiable.")
    assert cellrun.environment_failure(unsat)[0] == "not-installable"
