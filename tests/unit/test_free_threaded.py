"""Free-threaded CPython (``--python 3.13t``): its wheel tags, its Requires-Python, finding it, and the GIL check that
names the module turning the GIL on. The parts that need a free-threaded interpreter run on the one
``scripts/free_threaded_python.sh`` builds into jaxrel's cache (``.ci/run`` builds it), and skip with the command that
builds one where there is none."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag

from jaxrel.cells import probes
from jaxrel.compat.cell import extension_packages
from jaxrel.distributions import envs, pythons
from jaxrel.distributions.pages import IndexFile
from jaxrel.downstream.cellrun import CellResult
from jaxrel.downstream.report import gil_lines
from jaxrel.family import Family, resolve_family

PLATFORM = "manylinux_2_27_x86_64"


def test_a_free_threaded_build_takes_its_own_abi_and_pure_wheels_never_abi3_or_the_gil_builds() -> None:
    tags = pythons.supported_tags("3.13t", [PLATFORM])
    assert tags[0] == Tag("cp313", "cp313t", PLATFORM)
    assert Tag("py3", "none", "any") in tags
    assert Tag("cp313", "cp313", PLATFORM) not in tags
    assert not [tag for tag in tags if tag.abi == "abi3"]
    gil = pythons.supported_tags("3.13", [PLATFORM])
    assert Tag("cp313", "cp313t", PLATFORM) not in gil and Tag("cp313", "abi3", PLATFORM) in gil


def test_requires_python_compares_the_language_version_of_a_free_threaded_build() -> None:
    wheel = IndexFile("jaxlib-0.10.2-cp313-cp313t-manylinux_2_27_x86_64.whl", "https://x/j.whl", "index",
                      requires_python=">=3.11")
    assert wheel.supports_python("3.13t") and not IndexFile("a-1-py3-none-any.whl", "u", "s",
                                                              requires_python=">=3.14").supports_python("3.13t")
    assert wheel.installable("3.13t", pythons.supported_tags("3.13t", [PLATFORM]))
    assert not wheel.installable("3.13", pythons.supported_tags("3.13", [PLATFORM]))
    assert pythons.version_key("3.13") < pythons.version_key("3.13t") < pythons.version_key("3.14")


def test_no_free_threaded_interpreter_names_the_command_that_builds_one(monkeypatch: pytest.MonkeyPatch) -> None:
    pythons.python_for.cache_clear()
    monkeypatch.setattr(pythons, "uv_find", lambda version: None)
    monkeypatch.setattr(pythons, "all_pythons", lambda: {"3.11": pythons.Python("3.11", "/usr/bin/python3.11")})
    try:
        with pytest.raises(pythons.PythonNotFound, match=r"scripts/free_threaded_python.sh 3.13 "):
            pythons.python_for("3.13t")
        with pytest.raises(pythons.PythonVersionError, match="3.N or 3.Nt"):
            pythons.python_for("3.13tt")
    finally:
        pythons.python_for.cache_clear()


def _free_threaded() -> pythons.Python:
    pythons.all_pythons.cache_clear()  # an earlier test may have asked with another cache directory or HOME
    found = [python for version, python in pythons.all_pythons().items() if pythons.free_threaded(version)]
    if not found:
        pytest.skip("no free-threaded CPython here; build one: scripts/free_threaded_python.sh 3.13")
    return found[0]


def test_jaxrel_finds_the_interpreter_it_built_by_its_version() -> None:
    python = _free_threaded()
    assert pythons.python_for(python.version).executable == python.executable
    assert python.version not in pythons.find_pythons()  # never the interpreter of a GIL cell


EXTENSION = """
#include <Python.h>
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "gilly", NULL, 0, NULL};
PyMODINIT_FUNC PyInit_gilly(void) { return PyModuleDef_Init(&module); }
"""


def test_the_gil_check_names_the_module_that_turns_it_on(tmp_path: Path) -> None:
    """A planted extension that does not declare ``Py_mod_gil`` (as one built for the GIL ABI would not): the check
    names it, in CPython's words. Before it is imported the GIL stays off."""
    python = _free_threaded()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler here to build the planted extension")
    env = envs.create(tmp_path / "env", python=python.executable, use_uv=True)
    purelib, include, suffix = subprocess.run(
        [str(env.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'], sysconfig.get_paths()"
         "['include'], sysconfig.get_config_var('EXT_SUFFIX'))"], capture_output=True, text=True, check=True,
    ).stdout.split()
    package = Path(purelib) / "gilfront"
    package.mkdir()
    (package / "__init__.py").write_text("import json\n")
    family = _with_frontend(resolve_family(None), "gilfront")
    assert probes.gil_turned_on(env, family) is None
    subprocess.run([compiler, "-shared", "-fPIC", f"-I{include}", "-o", str(Path(purelib) / f"gilly{suffix}"),
                    "-x", "c", "-"], input=EXTENSION, text=True, check=True)
    assert probes.gil_turned_on(env, family) is None  # built, not imported
    as_extension = probes.gil_turned_on(env, family, also=["gilly"])  # as a compat cell's extension package
    assert as_extension is not None and "'gilly'" in as_extension, as_extension
    # a library's distribution whose package imports it, as a downstream cell probes the library under test
    (Path(purelib) / "gillib").mkdir()
    (Path(purelib) / "gillib" / "__init__.py").write_text("import gilly\n")
    (Path(purelib) / "gillib-1.0.dist-info").mkdir()
    (Path(purelib) / "gillib-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: gillib\n"
                                                                     "Version: 1.0\n")
    (Path(purelib) / "gillib-1.0.dist-info" / "RECORD").write_text("gillib/__init__.py,,\n"
                                                                   "gillib-1.0.dist-info/RECORD,,\n")
    done = env.run(*probes.gil_command(str(env.python), family, distributions=["gillib"]), unset=("PYTHON_GIL",))
    as_library = probes.gil_answer(done.returncode, done.stdout)
    assert as_library is not None and "'gilly'" in as_library, (as_library, done.stderr)
    (package / "__init__.py").write_text("import gilly\n")
    found = probes.gil_turned_on(env, family)
    assert found is not None and "'gilly'" in found and "GIL" in found, found


def test_the_extension_packages_the_gil_probe_imports_come_from_the_wheels(tmp_path: Path) -> None:
    wheel = tmp_path / "ext_a-1-cp313-cp313t-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in ["ext_a/__init__.py", "ext_a/sub/__init__.py", "ext_b/__init__.py", "ext_a-1.dist-info/RECORD",
                     "loose.py"]:
            archive.writestr(name, "")
    assert extension_packages([wheel, wheel]) == ["ext_a", "ext_b"]
    assert extension_packages("not built: no Bazel workspace") == [] and extension_packages(None) == []


def test_a_crater_and_a_minimum_name_the_library_whose_cells_turned_the_gil_on() -> None:
    on = CellResult("0.7.0", "0.7.0", "passed", gil="The global interpreter lock (GIL) has been enabled to load "
                    "module 'gilly._ext', which has not declared that it can run safely without the GIL. To override "
                    "this behavior and keep the GIL disabled (at your own risk), run with PYTHON_GIL=0 or -Xgil=0.")
    off, unchecked = CellResult("0.7.0", "0.7.0", "passed", gil="off"), CellResult("0.6.2", "0.6.2", "passed")
    lines = gil_lines([("gillib", on), ("gillib", on), ("calm", off), ("old", unchecked), ("none", None)])
    assert len(lines) == 1 and lines[0].startswith("free-threaded: the GIL came on as gillib loaded (its tests ran "
                                                   "with PYTHON_GIL=0): "), lines
    assert "'gilly._ext'" in lines[0]


def _with_frontend(family: Family, package: str) -> Family:
    """``family`` with its frontend's package replaced, its backend's left out, and no smoke code."""
    return replace(family, frontend=replace(family.frontend, package=package, smoke=None),
                   backend=replace(family.backend, package=""))


@pytest.mark.parametrize("use_uv", [True, False], ids=["uv", "pip"])
def test_wheels_only_takes_the_newest_release_with_a_wheel_never_an_sdist(tmp_path: Path, use_uv: bool) -> None:
    """What a free-threaded cell needs: NumPy's newest releases ship no cp313t wheel, and building one from its sdist
    needs a Fortran compiler (the first real 3.13t run failed so). With wheels only the resolver goes back to the
    newest release that has one, under uv and pip alike."""
    from matrix_family import sdist

    from jaxrel.distributions.pipconfig import PipIndexConfig
    from jaxrel.distributions.wheels import write_wheel

    house = tmp_path / "house"
    write_wheel(house, "pkgx", "1.0", {"pkgx/__init__.py": b"VERSION = '1.0'\n"})
    sdist(house, "pkgx", "2.0", (), {"setup.py": b"raise SystemExit('an sdist was built')\n"})
    index = PipIndexConfig(find_links=(str(house),), no_index=True)
    env = envs.create(tmp_path / "env", requirements=["pkgx"], use_uv=use_uv, index=index, only_binary=True)
    done = env.run(str(env.python), "-c", "import pkgx; print(pkgx.VERSION)")
    assert done.stdout.strip() == "1.0", done.stderr
    with pytest.raises(envs.EnvError, match="pkgx") as refused:  # refused, not built
        envs.create(tmp_path / "built", requirements=["pkgx==2.0"], use_uv=use_uv, index=index, only_binary=True)
    assert "an sdist was built" not in str(refused.value)
    with pytest.raises(envs.EnvError, match="an sdist was built|build dependencies"):  # without it: a build
        envs.create(tmp_path / "any", requirements=["pkgx"], use_uv=use_uv, index=index)


@pytest.mark.parametrize("admits", [True, False], ids=["admitted", "none-admitted"])
def test_the_default_matrix_gains_the_free_threaded_cells_or_says_why_not(monkeypatch: pytest.MonkeyPatch,
                                                                         admits: bool) -> None:
    """With a free-threaded interpreter here and a backend that ships wheels for its ABI: its cells join the default
    run; where the frontend admits none of those releases (jax 0.12: jaxlib's cp313t wheels stop at 0.10.2), the run
    says so. A backend of pure wheels gets no free-threaded axis."""
    from jaxrel.cells import planning
    from jaxrel.cells.matrix import FrontendSpec, Matrix, MatrixError
    from jaxrel.distributions.pages import Listing

    monkeypatch.setattr(planning, "all_pythons", lambda: {"3.12": pythons.Python("3.12", "/p3.12"),
                                                          "3.13t": pythons.Python("3.13t", "/p3.13t")})
    family = resolve_family(None)
    spec = FrontendSpec("jax", "0.12.0.1", "0.11.2", "wheel")
    backend = Listing("jaxlib", [IndexFile(f"jaxlib-{v}-cp313-cp313t-manylinux_2_27_x86_64.whl", "u", "s")
                                 for v in ("0.5.1", "0.10.2")])
    asked: list[list[str]] = []

    def build(chosen: list[str]) -> Matrix:
        asked.append(list(chosen))
        if "3.13t" in chosen and not admits:
            raise MatrixError("no jaxlib release admitted has a wheel for Python 3.13t")
        return Matrix(family.name, spec, "jaxlib")

    found = planning._with_free_threaded(Matrix(family.name, spec, "jaxlib"), build, ["3.12"], family, backend, spec,
                                         SpecifierSet(">=3.11"))
    if admits:
        assert asked[-1] == ["3.12", "3.13t"] and not found.notes
    else:
        assert asked == [["3.13t"]]
        assert found.notes == ["Python 3.13t: skipped: no jaxlib release jax 0.12.0.1 admits (minimum 0.11.2) ships a "
                               "cp313t wheel (jaxlib ships them for 0.5.1 to 0.10.2); its free-threaded cells need "
                               "another free-threaded Python (scripts/free_threaded_python.sh 3.N SUITE builds one)"]
    asked.clear()
    pure = Listing("jaxlib", [IndexFile("jaxlib-0.12.0-py3-none-any.whl", "u", "s")])
    assert not planning._with_free_threaded(Matrix(family.name, spec, "jaxlib"), build, ["3.12"], family, pure,
                                            spec, SpecifierSet(">=3.11")).notes and not asked
