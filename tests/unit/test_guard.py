"""The import-time guard, on a site-packages directory built file by file."""

from __future__ import annotations

import json
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


def test_guard_imports_nothing_but_the_standard_library(site):
    """Importing and running the guard must not pull in packaging, importlib.metadata or jaxrel's other modules."""
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
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
    added = set(json.loads(done.stdout))
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
              and not isinstance(value, type(guard))}
    assert set(guard.__all__) == public
