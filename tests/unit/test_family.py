"""The family model: the built-in jax profile and [tool.jaxrel] validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxrel.family import ConfigError, jax_profile, load_family, resolve_family

FULL = """
[tool.jaxrel]
name = "mylib"
[tool.jaxrel.frontend]
distribution = "mylib"
minimum-backend-variable = "_minimum_core_version"
[tool.jaxrel.backend]
distribution = "mylib-core"
ffi-header = "mylib_core/include/xla/ffi/api/c_api.h"
[[tool.jaxrel.api-numbers]]
name = "core_extension_version"
aliases = ["core_version"]
file = "mylib_core/client.py"
[[tool.jaxrel.plugins]]
distribution = "mylib-cuda*"
[[tool.jaxrel.plugins]]
distribution = "mylib-rocm"
pinned = false
[tool.jaxrel.releases."1.2.0"]
core_version = 42
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    return path


def test_jax_profile_describes_real_jax():
    family = jax_profile()
    assert (family.frontend.distribution, family.backend.distribution) == ("jax", "jaxlib")
    assert family.frontend.version_file == "jax/version.py"
    assert family.frontend.minimum_backend_variable == "_minimum_jaxlib_version"
    assert family.backend.version_module == "version"
    number = family.api_number("xla_extension_version")
    assert (number.name, number.file) == ("jaxlib_extension_version", "jaxlib/xla_client.py")
    assert number.variable == "_version"
    assert family.api_number("ifrt_version").variable == "_ifrt_version"
    assert family.plugin_for("jax-cuda12-plugin").pinned and family.plugin_for("jax_cuda12_pjrt").pinned
    assert family.plugin_for("jax-cuda13-plugin").pinned
    assert family.plugin_for("jax-rocm7-plugin").pinned is False  # ROCm's exemption
    assert family.plugin_for("jax-rocm60-pjrt").pinned is False
    assert family.plugin_for("jaxtyping") is None


def test_jax_profile_release_data_matches_measured_facts():
    family = jax_profile()
    measured = {"0.4.30": (271, "0.0"), "0.5.3": (320, "0.1"), "0.10.2": (467, "0.3"), "0.12.0": (505, "0.5")}
    for version, (api, ffi) in measured.items():
        row = family.backend_releases[version]
        assert (row["jaxlib_extension_version"], row["xla_ffi_api"]) == (api, ffi)
    assert family.frontend_minimums["0.12.0.1"] == "0.11.2"
    assert "0.4.32" not in family.backend_releases and "0.5.2" not in family.backend_releases
    assert "0.5.2" in family.frontend_minimums  # a jax-only release


def test_profile_from_pyproject(tmp_path):
    assert load_family(write(tmp_path, '[tool.jaxrel]\nprofile = "jax"\n')) == jax_profile()


def test_full_declaration(tmp_path):
    family = load_family(write(tmp_path, FULL))
    assert family.name == "mylib"
    assert family.frontend.package == "mylib" and family.frontend.version_file == "mylib/version.py"
    assert family.backend.package == "mylib_core"
    assert family.api_number("core_version").variable == "_version"
    assert family.plugin_for("mylib-cuda12").pinned and not family.plugin_for("mylib-rocm").pinned
    assert family.backend_releases == {"1.2.0": {"core_extension_version": 42}}
    gate = family.gate("core_extension_version")
    assert gate.module == "mylib_core.client" and dict(gate.releases()) == {"1.2.0": 42}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[tool.jaxrel]\nprofile = "jax"\nname = "x"\n', "'profile' cannot be combined with 'name'"),
        ('[tool.jaxrel]\nprofile = "torch"\n', "unknown profile 'torch'"),
        ('[tool.jaxrel]\nprofle = "jax"\n', "[tool.jaxrel] unknown key 'profle'"),
        (FULL.replace('distribution = "mylib-core"', 'distrib = "mylib-core"'),
         "[tool.jaxrel.backend] unknown key 'distrib'"),
        (FULL.replace('[tool.jaxrel.backend]\ndistribution = "mylib-core"', '[tool.jaxrel.backend]'),
         "[tool.jaxrel.backend] missing required key 'distribution'"),
        (FULL.replace('name = "mylib"\n', ""), "[tool.jaxrel] missing required key 'name'"),
        (FULL.replace('"1.2.0"', '"1.banana"'), "backend version '1.banana'"),
        (FULL.replace('"1.2.0"', '"1!1.2"'), "epoch"),
        (FULL.replace("core_version = 42", "core_version = -1"), "must be a non-negative integer"),
        (FULL.replace("core_version = 42", "other_version = 1"), "unknown key 'other_version'"),
        (FULL.replace('file = "mylib_core/client.py"', ""), "[tool.jaxrel.api-numbers[0]] missing required key 'file'"),
        (FULL.replace("pinned = false", 'pinned = "no"'), "'pinned' must be true or false"),
        (FULL.replace('"mylib-cuda*"', '"mylib-cuda?"'), "only '*' as a wildcard"),
        (FULL.replace('minimum-backend-variable = "_minimum_core_version"', 'minimum-backend = "soon"'),
         "'minimum-backend' is not a PEP 440 version"),
        (FULL.replace('minimum-backend-variable = "_minimum_core_version"', 'tests = "tests"'),
         "'tests' must be a list of paths"),
        (FULL.replace('minimum-backend-variable = "_minimum_core_version"', 'tests = ["../elsewhere"]'),
         "'tests' must be a path relative to the frontend's source tree"),
        (FULL.replace('minimum-backend-variable = "_minimum_core_version"', 'test-requirements = "/etc/reqs.txt"'),
         "'test-requirements' must be a path relative to the frontend's source tree"),
        ("[tool.jaxrel\n", "not valid TOML"),
        ("[project]\nname = 'x'\n", "no [tool.jaxrel] table"),
    ],
)
def test_config_errors_are_one_line_naming_file_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_family(path)
    message = str(info.value)
    assert expected in message
    assert message.startswith(str(path)) and "\n" not in message


def test_own_tests_and_their_requirements(tmp_path):
    text = FULL.replace('minimum-backend-variable = "_minimum_core_version"',
                        'tests = ["tests/core_test.py", "tests/more"]\ntest-requirements = "tests/requirements.txt"')
    frontend = load_family(write(tmp_path, text)).frontend
    assert frontend.tests == ("tests/core_test.py", "tests/more")
    assert frontend.test_requirements == "tests/requirements.txt" and frontend.smoke is None
    plain = load_family(write(tmp_path, FULL))
    assert plain.frontend.tests == () and plain.frontend.test_requirements is None and not plain.compat_suite
    jax = jax_profile()
    assert jax.compat_suite and jax.frontend.test_requirements == "build/test-requirements.txt"
    assert "tests/tree_util_test.py" in jax.frontend.tests and "jnp.ones(3)" in str(jax.frontend.smoke)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        resolve_family(str(tmp_path / "nope.toml"))


def test_repository_declares_its_own_family():
    root = Path(__file__).resolve().parents[2]
    assert load_family(root / "pyproject.toml").name == "jax"
