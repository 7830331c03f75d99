"""`jaxrel doctor` on environments built file by file (the integration tests use real wheels)."""

from __future__ import annotations

import sys

from jaxrel import doctor
from jaxrel.distributions import installed
from jaxrel.family import jax_profile


def diagnose(site):
    family = jax_profile()
    env = installed.read_environment(family, path=site.path)
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


def test_plugin_families_each_with_its_verdict_and_fix(site):
    site.jax("0.12.0.1", "0.11.2")
    site.write("jax-0.12.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: jax\nVersion: 0.12.0.1\n"
               "Provides-Extra: tpu\nRequires-Dist: libtpu==0.0.50.*; extra == \"tpu\"\n")
    site.jaxlib("0.12.0.1")
    site.distribution("jax-cuda12-plugin", "0.12.0.1")
    site.distribution("jax-cuda12-pjrt", "0.12.0.1")
    site.distribution("jax-cuda13-plugin", "0.12.0")
    site.distribution("jax-rocm7-plugin", "0.12.0.post1")
    site.distribution("libtpu", "0.0.52")
    family = jax_profile()
    env, result = diagnose(site)
    found = {s.name: s for s in doctor.plugin_families(family, env)}
    assert found["cuda12"].verdict == "ok" and len(found["cuda12"].installed) == 2
    assert found["cuda13"].verdict == "mismatched"
    assert found["cuda13"].fix == 'pip install "jax-cuda13-plugin==0.12.0.1"'
    assert found["rocm7"].verdict == "exempt"
    assert found["tpu"].verdict == "warning" and found["tpu"].fix == 'pip install "libtpu==0.0.50.*"'
    text = doctor.render(family, env, result)
    assert "plugin families:" in text and 'cuda13: mismatched' in text
    data = doctor.to_json(family, env, result)
    assert {f["name"]: f["verdict"] for f in data["plugin_families"]} == {
        "cuda12": "ok", "cuda13": "mismatched", "rocm7": "exempt", "tpu": "warning"}


def test_a_runtime_within_the_extras_pin_is_ok(site):
    site.jax("0.12.0.1", "0.11.2")
    site.write("jax-0.12.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: jax\nVersion: 0.12.0.1\n"
               "Requires-Dist: libtpu==0.0.50.*; extra == \"tpu\"\n")
    site.jaxlib("0.12.0.1")
    site.distribution("libtpu", "0.0.50.1")
    env, _ = diagnose(site)
    (status,) = doctor.plugin_families(jax_profile(), env)
    assert (status.name, status.verdict, status.fix) == ("tpu", "ok", None)


def test_a_damaged_installed_distribution_is_skipped_with_a_note(site):
    """No Version, METADATA that is not UTF-8, a version packaging refuses: each is named and skipped, and the
    family beside them is still judged."""
    site.jax("0.10.2", "0.10.1")
    site.jaxlib("0.10.2", api=467, ffi=(0, 3))
    site.write("noversion-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: noversion\n")
    site.write("banana-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: banana\nVersion: " + "9" * 5000 + "\n")
    (site.root / "latin-1.0.dist-info").mkdir()
    (site.root / "latin-1.0.dist-info" / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: l\xe4tin\nVersion: 1\n")
    env, result = diagnose(site)
    assert result.compatible and env.backend is not None and env.backend.version == "0.10.2"
    notes = " | ".join(env.notes)
    assert "noversion-1.0.dist-info: its METADATA has no Version" in notes
    assert "latin-1.0.dist-info: its metadata cannot be read" in notes
    assert "banana-1.0.dist-info" in notes and len(notes) < 2000
    assert "skipped" in doctor.render(jax_profile(), env, result)
