"""[tool.jaxrel.release]: components, roles, locations, and one-line errors for bad config."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from jaxrel.family import ConfigError, family_from_config, jax_profile
from jaxrel.release.config import Location, jax_release, release_from_config

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "splitfam"


def config() -> dict[str, Any]:
    return tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["tool"]["jaxrel"]


def release(table: dict[str, Any]) -> Any:
    return release_from_config(table, family_from_config(config()))


def test_sample_family_components_in_upload_order() -> None:
    parsed = release(config()["release"])
    assert [(c.distribution, c.role, c.build) for c in parsed.components] == [
        ("splitfam-core", "backend", "bazel"), ("splitfam-cpu-plugin", "plugin", "python"),
        ("splitfam", "frontend", "python")]
    core = parsed.component("backend")
    assert core.targets == ("//core:wheel",)
    assert [str(v) for v in core.versions] == ["core/splitfam_core/version.py:_version", "core/version.bzl:VERSION"]
    assert parsed.frontend().minimum_backend == Location("frontend/splitfam/version.py", "_minimum_core_version")
    assert parsed.tag_for("0.2.0") == "v0.2.0"
    assert Location("pyproject.toml", "project.version").kind == "toml"
    assert Location("core/version.bzl", "VERSION").kind == "assignment"


def test_jax_profile_release_reads_jax_files() -> None:
    parsed = jax_release()
    assert parsed.frontend().minimum_backend == Location("jax/version.py", "_minimum_jaxlib_version")
    assert parsed.backend().build == "external"
    assert parsed.tag_for("0.5.0") == "jax-v0.5.0"
    assert jax_profile().name == "jax"


@pytest.mark.parametrize(("change", "message"), [
    ({"tag": "release"}, "'tag' must be a string containing {version}"),
    ({"colour": 1}, "unknown key 'colour'"),
    ({"components": []}, "must be a table of components"),
    ({"components": {}}, "no components"),
    ({"components": {"splitfam": {"versions": ["nocolon"]}}}, "is not FILE:KEY"),
    ({"components": {"splitfam": {"versions": ["/abs/v.py:_version"]}}}, "is not FILE:KEY"),
    ({"components": {"splitfam": {"versions": ["../v.py:_version"]}}}, "is not FILE:KEY"),
    ({"components": {"splitfam": {"versions": ["v.py:not-a-name"]}}}, "is not a variable name"),
    ({"components": {"splitfam": {"versions": []}}}, "'versions' is empty"),
    ({"components": {"splitfam": {"versions": ["v.py:_v"], "build": "make"}}}, "'build' must be one of"),
    ({"components": {"splitfam-core": {"versions": ["v.py:_v"], "build": "bazel"}}}, "'targets' is empty"),
    ({"components": {"splitfam-core": {"versions": ["v.py:_v"]}}}, "a backend release needs the frontend"),
    ({"components": {"splitfam-core": {"versions": ["v.py:_v"], "minimum-backend": "v.py:_m"},
                     "splitfam": {"versions": ["v.py:_v"]}}}, "'minimum-backend' belongs to the frontend"),
    ({"components": {"splitfam": {"versions": ["v.py:_v"], "path": "../elsewhere"}}}, "'path' must be a directory"),
    ({"components": {"splitfam-core": {"versions": ["v.py:_v"], "build": "bazel", "targets": ["//c:w"],
                                       "bazel-options": ["config=manylinux"]}}}, "'bazel-options' must be a list"),
    ({"components": {"splitfam-core": {"versions": ["v.py:_v"], "build": "bazel", "targets": ["//c:w"],
                                       "bazel-options": ["--config=a --x"]}}}, "each one word starting with --"),
    ({"components": {"splitfam": {"versions": ["v.py:_v"], "bazel-options": ["--config=manylinux"]}}},
     "'bazel-options' is for a component built by Bazel"),
])
def test_bad_release_config_is_one_clear_line(change: dict[str, Any], message: str) -> None:
    table = {**config()["release"], **change}
    with pytest.raises(ConfigError) as raised:
        release(table)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_release_table_is_allowed_beside_a_profile() -> None:
    assert family_from_config({"profile": "jax", "release": {}}).name == "jax"


def test_released_separately_is_the_familys_one_flag() -> None:
    """One flag, the family's, read by the compat matrix and the release: a release table may not contradict it."""
    from jaxrel.errors import BadInput
    from jaxrel.family import resolve_family
    from jaxrel.release.config import BUILTIN, release_from_config

    jax = resolve_family("jax")
    built_in = {c.distribution: c.released_separately for c in BUILTIN["jax"]().components}
    assert built_in["jax-oneapi-plugin"] and built_in["jax-rocm7-plugin"] and built_in["libtpu"]
    assert not built_in["jax-cuda13-plugin"]
    table = {"components": {"jax": {"build": "python", "versions": ["jax/version.py:_version"]},
                            "jax-oneapi-plugin": {"build": "external", "shares-version-with": "jax"}}}
    derived = release_from_config(table, jax)
    assert derived.component("jax-oneapi-plugin").released_separately  # from the family, not said again
    table["components"]["jax-oneapi-plugin"]["released-separately"] = False
    with pytest.raises(BadInput, match="the family's plugin jax-oneapi-plugin says true"):
        release_from_config(table, jax)


def test_bazel_options_reach_the_release_build_of_that_component(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """This tree's own extension components are released portable (``--config=manylinux``): the options go to
    Bazel with the component's targets, and to no other component."""
    from jaxrel.distributions import bazel
    from jaxrel.release import builder
    from jaxrel.release.project import open_project

    asked: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def fake_build(root: Path, *, wheels: Any, bazel_options: Any = (), **rest: Any) -> None:
        asked.append((tuple(wheels), tuple(bazel_options)))
        raise bazel.BuildError("stop here")

    monkeypatch.setattr(bazel, "build", fake_build)
    with open_project(REPO) as project:
        components = {c.distribution: c for c in project.release.components}
        assert components["jaxrel-rmsnorm-cuda13"].bazel_options == ("--config=manylinux",)
        assert components["jaxrel"].bazel_options == ()
        with pytest.raises(builder.ReleaseBuildError, match="stop here"):
            builder._bazel_build(project, components["jaxrel-rmsnorm"], tmp_path, None, lambda _: None)
    assert asked == [(("//rmsnorm:wheel",), ("--config=manylinux",))]


def test_wheels_all_is_the_release_grid_grouped_by_bazel_options(tmp_path: Path) -> None:
    """``jaxrel build --wheels all``: every wheel this tree releases with Bazel (the manual CUDA ones included),
    one Bazel run per set of options."""
    from jaxrel.cli.build import release_grid

    assert release_grid(REPO) == {("--config=manylinux",): ["//rmsnorm:wheel", "//rmsnorm:wheel_cuda13",
                                                             "//rmsnorm:wheel_cuda12"]}
    tree = tmp_path / "splitfam"
    tree.mkdir()
    (tree / "pyproject.toml").write_text((TEMPLATE / "pyproject.toml").read_text())
    assert release_grid(tree) == {(): ["//core:wheel"]}
