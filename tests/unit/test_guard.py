"""The import-time guard, on a site-packages directory built file by file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrel import guard
from jaxrel.family import jax_profile

REPO = Path(__file__).resolve().parents[2]


def check(site, jax="0.12.0.1", minimum="0.11.2", **kwargs):
    arguments = jax_profile().guard_arguments(jax, minimum)
    return guard.check(**{**arguments, **kwargs, "path": site.path})


def test_accepts_a_fitting_backend_and_returns_its_version(site):
    site.jaxlib("0.12.0")
    assert check(site) == "0.12.0"


def test_backend_below_minimum_names_versions_range_fix_and_skip_variable(site):
    site.jaxlib("0.11.0")
    with pytest.raises(guard.GuardError) as info:
        check(site)
    message = str(info.value)
    assert "jaxlib is version 0.11.0" in message and "jax 0.12.0.1" in message
    assert "0.11.2 <= jaxlib <= 0.12.0.1" in message
    assert 'Fix: pip install "jaxlib>=0.11.2,<=0.12.0.1"' in message
    assert "JAXREL_SKIP_GUARD=1" in message
    assert info.value.fix == 'pip install "jaxlib>=0.11.2,<=0.12.0.1"'
    assert info.value.installed == {"jax": "0.12.0.1", "jaxlib": "0.11.0"}
    assert isinstance(info.value, ImportError)


def test_backend_newer_than_frontend_offers_both_fixes(site):
    site.jaxlib("0.12.0.1")
    with pytest.raises(guard.GuardError) as info:
        check(site, jax="0.12.0")
    message = str(info.value)
    assert "jaxlib version 0.12.0.1 is newer than jax 0.12.0" in message
    assert 'pip install "jaxlib>=0.11.2,<=0.12.0"' in message
    assert "pip install --upgrade jax jaxlib" in message


def test_missing_backend(site):
    with pytest.raises(guard.GuardError, match="jaxlib is not installed") as info:
        check(site)
    assert info.value.fix == 'pip install "jaxlib>=0.11.2,<=0.12.0.1"'


def test_dev_frontend_at_head_accepts_released_backends(site):
    for backend in ("0.4.35", "0.4.36"):
        site.jaxlib(backend)
        assert check(site, jax="0.4.36.dev20241119+gabc", minimum="0.4.35") == backend


def test_unstamped_version_module_falls_back_to_version(site):
    site.write("jaxlib/version.py", '_version = "0.12.0"\n_release_version: str | None = None\n')
    assert check(site) == "0.12.0"


def test_mismatched_plugin_is_refused_before_loading_with_align_command(site):
    site.jaxlib("0.12.0.1")
    site.distribution("jax-cuda12-plugin", "0.12.0", {"jax_cuda12_plugin/__init__.py": "raise SystemExit('loaded')"})
    site.distribution("jax-cuda12-pjrt", "0.12.0.1")
    with pytest.raises(guard.GuardError) as info:
        check(site)
    message = str(info.value)
    assert "jax-cuda12-plugin 0.12.0 installed" in message and "jaxlib 0.12.0.1" in message
    assert info.value.fix == 'pip install "jax-cuda12-plugin==0.12.0.1"'
    assert info.value.installed["jax-cuda12-pjrt"] == "0.12.0.1"
    assert "jax_cuda12_plugin" not in sys.modules


def test_matching_plugins_and_exempt_rocm_pass(site):
    site.jaxlib("0.12.0.1")
    site.distribution("jax-cuda12-plugin", "0.12.0.1")
    site.distribution("jax-cuda12-pjrt", "0.12.0.1")
    site.distribution("jax-rocm7-plugin", "0.9.1")
    assert check(site) == "0.12.0.1"


def test_skip_variable(site, monkeypatch):
    monkeypatch.setenv(guard.SKIP_ENV, "1")
    assert check(site) is None  # no backend at all, yet skipped


def test_unparseable_installed_version_is_an_import_error(site):
    site.write("jaxlib/version.py", '_version = "0.12.0-banana"\n')
    with pytest.raises(guard.GuardError, match="not a PEP 440 version"):
        check(site)


def test_imported_backend_module_version_is_used(site, monkeypatch):
    module = type(sys)("fakebackend")
    module.__version__ = "2.0.0"
    monkeypatch.setitem(sys.modules, "fakebackend", module)
    assert guard.check(backend="fakebackend", minimum_backend="1.0") == "2.0.0"
    with pytest.raises(guard.GuardError, match="fakebackend is version 2.0.0"):
        guard.check(backend="fakebackend", minimum_backend="3.0")


def _modules_added_by_accepting(site, *flags: str) -> list[str]:
    """The modules a fresh interpreter (with ``flags``) loads to import the guard and accept ``site``."""
    site.jaxlib("0.12.0.1")
    site.distribution("jax-cuda12-plugin", "0.12.0.1")
    code = f"""
import json, sys
before = set(sys.modules)
sys.path.insert(0, {str(REPO)!r})
import jaxrel.guard as guard
guard.check(frontend="jax", frontend_version="0.12.0.1", backend="jaxlib", minimum_backend="0.11.2",
            plugins=(guard.Plugin("jax-cuda12-plugin"), guard.Plugin("jax-rocm*", pinned=False)),
            path={site.path!r})
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    done = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(done.stdout))


def test_guard_imports_nothing_but_the_standard_library(site):
    """Importing and running the guard must not pull in packaging, importlib.metadata or jaxrel's other modules."""
    added = set(_modules_added_by_accepting(site, "-S"))
    assert {m for m in added if m.startswith("jaxrel")} == {"jaxrel", "jaxrel.guard"}
    assert not {m for m in added if m.split(".")[0] in ("packaging", "jaxlib", "jax")}
    assert "importlib.metadata" not in added and "importlib.resources" not in added
    stdlib = set(sys.stdlib_module_names)
    assert {m.split(".")[0] for m in added} - {"jaxrel"} <= stdlib


@pytest.mark.parametrize("value", ["0", "", "false", "False", "no", "true", "yes", " 1", "01"])
def test_only_skip_variable_1_skips(site, monkeypatch, value):
    monkeypatch.setenv(guard.SKIP_ENV, value)
    with pytest.raises(guard.GuardError, match="jaxlib is not installed"):
        check(site)


def test_all_lists_exactly_the_public_names():
    public = {name for name, value in vars(guard).items()
              if not name.startswith("_") and getattr(value, "__module__", guard.__name__) == guard.__name__
              and not isinstance(value, type(guard))} - {"TYPE_CHECKING"}
    assert set(guard.__all__) == public


# Defects: nothing but GuardError may leave the guard, and "not installed" means not installed.

INT_LIMIT_DIGITS = "1" * 5000  # more digits than int() converts (sys.get_int_max_str_digits(), 4300)
REINSTALL = 'pip install --force-reinstall "jaxlib>=0.11.2,<=0.12.0.1"'


def test_non_utf8_version_file_is_a_guard_error_naming_the_file(site):
    file = site.root / "jaxlib" / "version.py"
    site.write("jaxlib/version.py", "")
    file.write_bytes(b'# \xff\xfe caf\xe9\n_version = "0.12.0"\n')
    with pytest.raises(guard.GuardError) as info:
        check(site)
    assert f"jaxlib is installed, but its version cannot be read from {file} (not UTF-8 text)" in str(info.value)
    assert info.value.fix == REINSTALL
    assert guard.backend_version("jaxlib", path=site.path) is None
    assert guard.read_version_file(str(file)) is None


def _symlink_loop(site):
    file = site.root / "jaxlib" / "version.py"
    file.parent.mkdir(parents=True)
    file.symlink_to(file)
    return "Too many levels of symbolic links"


@pytest.mark.parametrize(("contents", "why"), [
    ("# no version here\nfull_version = '0.12.0'\n", "no string assigned to _release_version, _version, __version__"),
    ("_version = None\n_release_version: str | None = None\n", "no string assigned to"),
    ("__version__ = VERSION\n", "no string assigned to"),
    (None, "Is a directory"),
    (_symlink_loop, "Too many levels of symbolic links"),
])
def test_backend_whose_version_cannot_be_read_is_installed_not_missing(site, contents, why):
    if contents is None:
        (site.root / "jaxlib" / "version.py").mkdir(parents=True)
    elif callable(contents):
        contents(site)
    else:
        site.write("jaxlib/version.py", contents)
    file = site.root / "jaxlib" / "version.py"
    with pytest.raises(guard.GuardError) as info:
        check(site)
    message = str(info.value)
    assert "not installed" not in message
    assert f"jaxlib is installed, but its version cannot be read from {file} ({why}" in message
    assert "jax 0.12.0.1 needs 0.11.2 <= jaxlib <= 0.12.0.1" in message
    assert f"Fix: {REINSTALL}" in message and info.value.fix == REINSTALL
    assert "JAXREL_SKIP_GUARD=1" in message


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_version_file_is_installed_not_missing(site):
    file = site.write("jaxlib/version.py", '_version = "0.12.0"\n')
    file.chmod(0)
    try:
        with pytest.raises(guard.GuardError, match="installed, but its version cannot be read .*Permission denied"):
            check(site)
    finally:
        file.chmod(0o644)


def test_version_file_shadowing_a_later_entry_is_read_not_skipped(site, tmp_path):
    """The first entry holding the version module decides, as it does for the import."""
    site.write("jaxlib/version.py", "# emptied\n")
    later = tmp_path / "later"
    (later / "jaxlib").mkdir(parents=True)
    (later / "jaxlib" / "version.py").write_text('_version = "0.12.0"\n')
    with pytest.raises(guard.GuardError, match="installed, but its version cannot be read"):
        guard.check(backend="jaxlib", minimum_backend="0.11.2", path=[*site.path, str(later)])
    assert guard.check(backend="jaxlib", minimum_backend="0.11.2", path=[str(site.root / "missing"), str(later)]) \
        == "0.12.0"


@pytest.mark.parametrize("bad", [lambda root: Path(root), lambda root: bytes(Path(root)), lambda root: None,
                                 lambda root: 3])
def test_non_str_sys_path_entries_are_skipped(site, monkeypatch, bad):
    site.write("fakejaxlib/version.py", '_version = "0.12.0.1"\n')
    site.distribution("jax-cuda12-plugin", "0.12.0.1")
    site.write("fakejaxlib/include/xla/ffi/api/c_api.h", "#define XLA_FFI_API_MAJOR 0\n#define XLA_FFI_API_MINOR 3\n")
    arguments = dict(frontend="jax", frontend_version="0.12.0.1", backend="fakejaxlib", minimum_backend="0.11.2",
                     plugins=(guard.Plugin("jax-cuda12-plugin"), guard.Plugin("jax-rocm*", pinned=False)))
    monkeypatch.setattr(sys, "path", [bad(site.root), str(site.root)])
    assert guard.check(**arguments, minimum_ffi_api="0.3") == "0.12.0.1"
    assert guard.installed_distributions() == {"jax-cuda12-plugin": "0.12.0.1"}
    assert guard.check(**arguments, path=[bad(site.root), *site.path]) == "0.12.0.1"  # type: ignore[list-item]
    monkeypatch.setattr(sys, "path", [bad(site.root)])
    with pytest.raises(guard.GuardError, match="fakejaxlib is not installed"):
        guard.check(**arguments)
    assert guard.installed_distributions() == {}
    assert guard.backend_ffi_api("fakejaxlib", "include/xla/ffi/api/c_api.h") is None


def test_version_longer_than_int_conversion_is_a_guard_error(site):
    site.write("jaxlib/version.py", f'_version = "0.{INT_LIMIT_DIGITS}"\n')
    with pytest.raises(guard.GuardError, match="jaxlib version '0.1111.*too long to compare") as info:
        check(site)
    assert len(str(info.value)) < 400
    site.jaxlib("0.12.0")
    for arguments in ({"jax": f"0.{INT_LIMIT_DIGITS}"}, {"minimum": f"{INT_LIMIT_DIGITS}.0"}):
        with pytest.raises(guard.GuardError, match="too long to compare"):
            check(site, **arguments)
    with pytest.raises(ValueError, match="too long to compare"):
        guard.release_of(f"1.{INT_LIMIT_DIGITS}rc1")


def test_ffi_api_longer_than_int_conversion_is_a_guard_error(site):
    site.jaxlib("0.12.0")
    site.write("jaxlib/include/xla/ffi/api/c_api.h",
               f"#define XLA_FFI_API_MAJOR {INT_LIMIT_DIGITS}\n#define XLA_FFI_API_MINOR 3\n")
    assert guard.ffi_api_in(f"#define XLA_FFI_API_MAJOR {INT_LIMIT_DIGITS}\n#define XLA_FFI_API_MINOR 3\n") is None
    with pytest.raises(guard.GuardError, match="no readable XLA FFI API"):
        check(site, minimum_ffi_api="0.3")
    site.jaxlib("0.12.0")
    for minimum in (f"0.{INT_LIMIT_DIGITS}", "0.x", "", "²"):
        with pytest.raises(guard.GuardError, match="minimum XLA FFI API"):
            check(site, minimum_ffi_api=minimum)


def test_non_utf8_or_odd_digits_in_the_ffi_header_are_no_readable_api(site):
    site.jaxlib("0.12.0")
    header = site.root / "jaxlib" / "include" / "xla" / "ffi" / "api" / "c_api.h"
    header.write_bytes(b"/* \xff */\n#define XLA_FFI_API_MAJOR 0\n#define XLA_FFI_API_MINOR 3\n")
    assert guard.read_ffi_api(str(header)) is None
    with pytest.raises(guard.GuardError, match="no readable XLA FFI API"):
        check(site, minimum_ffi_api="0.3")
    assert guard.ffi_api_in("#define XLA_FFI_API_MAJOR \u00b2\n#define XLA_FFI_API_MINOR 3\n") is None


@pytest.mark.parametrize("plugin", ["jax-cuda12-plugin", "JAX_Cuda12.plugin", "*cuda12-plugin", "jax*plugin", "*"])
def test_plugins_are_found_whatever_the_spelling_of_dist_info_and_pattern(site, plugin):
    site.jaxlib("0.12.0.1")
    site.write("Jax.Cuda12__Plugin-0.12.0.dist-info/METADATA", "")
    site.write("unrelated_dist-1.0.dist-info/METADATA", "")
    with pytest.raises(guard.GuardError, match="jax-cuda12-plugin 0.12.0[, ]") as info:
        check(site, plugins=(guard.Plugin(plugin),))
    if plugin != "*":
        assert "unrelated-dist" not in info.value.installed
    assert check(site, plugins=(guard.Plugin("jax-rocm*"), guard.Plugin(plugin, pinned=False))) == "0.12.0.1"


def test_accepting_path_imports_no_module_but_the_guard(site):
    """With ``site`` run (``os`` loaded, as in any interpreter), accepting imports nothing beyond jaxrel.guard."""
    assert _modules_added_by_accepting(site) == ["jaxrel", "jaxrel.guard"]


def test_long_version_module_is_read_to_its_end(site):
    site.write("jaxlib/version.py", "# padding\n" * 30000 + '_version = "0.12.0"\n')  # 300 kB
    assert check(site) == "0.12.0"
    site.write("jaxlib/version.py", "")
    with pytest.raises(guard.GuardError, match="installed, but its version cannot be read"):
        check(site)
