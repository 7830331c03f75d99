"""`jaxrel doctor` on environments built file by file (the integration tests use real wheels)."""

from __future__ import annotations

import sys

from jaxrel import doctor
from jaxrel.family import jax_profile


def diagnose(site):
    family = jax_profile()
    env = doctor.read_environment(family, path=site.path)
    return env, doctor.diagnose(family, env)


def test_reads_versions_numbers_and_ffi_without_importing(site):
    site.jax("0.10.2", "0.10.1")
    site.jaxlib("0.10.2", api=467, ffi=(0, 3))
    site.distribution("jax-cuda12-plugin", "0.10.2")
    env, result = diagnose(site)
    assert (env.frontend.version, env.backend.version, env.minimum_backend) == ("0.10.2", "0.10.2", "0.10.1")
    assert [p.name for p in env.plugins] == ["jax-cuda12-plugin"]
    assert env.api_numbers == {"jaxlib_extension_version": 467, "ifrt_version": None}
    assert env.xla_ffi_api == "0.3"
    assert result.compatible
    assert "jaxlib" not in sys.modules


def test_reports_mismatch_with_fix(site):
    site.jax("0.6.2", "0.6.2")
    site.jaxlib("0.10.2")
    env, result = diagnose(site)
    assert not result.compatible
    assert [v.rule for v in result.violations] == ["backend-not-newer-than-frontend"]
    text = doctor.render(jax_profile(), env, result)
    assert "INCOMPATIBLE" in text and 'fix: pip install "jaxlib>=0.6.2,<=0.6.2"' in text
    data = doctor.to_json(jax_profile(), env, result)
    assert data["compatible"] is False and data["environment"]["backend"]["version"] == "0.10.2"


def test_missing_backend_is_a_violation_with_fix(site):
    site.jax("0.12.0", "0.11.2")
    _, result = diagnose(site)
    assert [v.rule for v in result.violations] == ["backend-installed"]
    assert result.fix == 'pip install "jaxlib>=0.11.2,<=0.12.0"'


def test_frontend_from_a_source_tree(site):
    """A jax checkout on the path (no .dist-info) is found through its version file."""
    site.write("jax/version.py", '_version = "0.4.36"\n_minimum_jaxlib_version = "0.4.35"\n')
    site.jaxlib("0.4.35")
    env, result = diagnose(site)
    assert env.frontend.version == "0.4.36" and env.minimum_backend == "0.4.35"
    assert result.compatible


def test_rocm_plugin_exempt(site):
    site.jax("0.10.2", "0.10.1")
    site.jaxlib("0.10.2")
    site.distribution("jax-rocm7-plugin", "0.9.1")
    _, result = diagnose(site)
    assert result.compatible
