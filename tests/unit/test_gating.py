"""API-version gates: reading the number, choosing a path, refusing clearly."""

from __future__ import annotations

import sys

import pytest

from jaxrel import gating
from jaxrel.family import jax_profile
from jaxrel.gating import ApiGate, ApiVersionError, first_release_providing

RELEASES = {"0.10.1": 452, "0.10.2": 467, "0.11.0": 477, "0.12.0": 505, "0.12.0.1": 505, "0.9.0.1": 397}


@pytest.fixture
def backend(site, monkeypatch):
    """A backend `fakelib` whose client module declares _version = 467, on sys.path."""
    site.write("fakelib/__init__.py", "")
    site.write("fakelib/client.py", "_version = 467  # the change\n_ifrt_version = 40 + 15\n")
    monkeypatch.syspath_prepend(str(site.root))
    yield site
    for name in ("fakelib", "fakelib.client"):
        sys.modules.pop(name, None)


def gate(variable="_version", releases=RELEASES):
    return ApiGate("fake_extension_version", backend="fakelib", module="fakelib.client", variable=variable,
                   releases=releases)


def test_reads_number_from_source_without_importing(backend):
    assert gate().value == 467
    assert "fakelib.client" not in sys.modules


def test_non_literal_number_is_read_by_importing_the_module(backend):
    assert gate("_ifrt_version").value == 55
    assert "fakelib.client" in sys.modules


def test_imported_module_wins(backend, monkeypatch):
    module = type(sys)("fakelib.client")
    module._version = 999
    monkeypatch.setitem(sys.modules, "fakelib.client", module)
    assert gate().value == 999


def test_at_least_and_choose(backend):
    g = gate()
    assert g.at_least(467) and not g.at_least(468)
    assert g.choose(467, "new", "old") == "new"
    assert g.choose(500, "new", "old") == "old"


def test_first_release_providing_orders_by_release_number():
    assert first_release_providing(470, RELEASES) == "0.11.0"
    assert first_release_providing(505, RELEASES) == "0.12.0"
    assert first_release_providing(400, RELEASES) == "0.10.1"
    assert first_release_providing(600, RELEASES) is None


def test_requires_decorator_names_first_release_and_fix(backend):
    @gate().requires(505)
    def new_feature(x):
        return x + 1

    with pytest.raises(ApiVersionError) as info:
        new_feature(1)
    message = str(info.value)
    assert "new_feature needs fake_extension_version >= 505" in message
    assert "provides 467" in message
    assert "first fakelib release known to provide it is 0.12.0" in message
    assert 'pip install "fakelib>=0.12.0"' in message

    @gate().requires(400)
    def old_feature(x):
        return x + 1

    assert old_feature(1) == 2
    assert old_feature.__jaxrel_api__ == ("fake_extension_version", 400)


def test_without_release_data_points_at_head(backend):
    with pytest.raises(ApiVersionError, match="no released fakelib is known to provide it; build fakelib at HEAD"):
        gate(releases=None).require(468)
    with pytest.raises(ApiVersionError, match="no released fakelib is known"):
        gate().require(10_000)


def test_missing_backend_is_a_clear_error(monkeypatch):
    g = ApiGate("x_version", backend="nosuchlib", module="nosuchlib.client")
    with pytest.raises(ApiVersionError, match="nosuchlib.client is not importable.*install nosuchlib"):
        _ = g.value


def test_builtin_jax_gates_carry_measured_release_data():
    assert gating.xla_extension_version is gating.jaxlib_extension_version
    releases = gating.jaxlib_extension_version.releases()
    assert releases["0.10.2"] == 467 and releases["0.12.0"] == 505
    assert first_release_providing(500, releases) == "0.12.0"
    assert jax_profile().gate("jaxlib_extension_version").releases() == releases


@pytest.fixture
def installed(site, monkeypatch):
    """`site` first on sys.path, with the built-in gates' cached numbers forgotten."""
    monkeypatch.syspath_prepend(str(site.root))
    for gate in set(gating.API_GATES.values()):
        monkeypatch.setattr(gate, "_value", None)
    return site


def test_unmet_is_none_when_releases_and_api_numbers_are_met(installed):
    installed.jax("0.10.2", "0.10.1")
    installed.jaxlib("0.10.2", api=467)
    assert gating.unmet({"jax": "0.10.2", "jaxlib": "0.10.1.0"}, {"jaxlib_extension_version": 467}) is None
    assert gating.unmet() is None
    assert not {"jax", "jaxlib", "jaxlib.xla_client"} & set(sys.modules)


def test_unmet_names_the_requirement_and_the_installed_release(installed):
    installed.jax("0.12.0", "0.11.2")
    installed.jaxlib("0.12.0")
    assert gating.unmet({"jax": "0.12.0.1"}) == "needs jax >= 0.12.0.1, installed jax 0.12.0"
    assert gating.unmet({"jax": "0.12.0", "jaxlib": "0.12.1"}) == "needs jaxlib >= 0.12.1, installed jaxlib 0.12.0"


def test_unmet_compares_release_numbers_only(installed):
    installed.write("jax/version.py", '_version = "0.4.36.dev20241119+gabc"\n')
    assert gating.unmet({"jax": "0.4.36"}) is None
    assert gating.unmet({"jax": "0.4.37"}) == "needs jax >= 0.4.37, installed jax 0.4.36.dev20241119+gabc"


def test_unmet_when_a_distribution_is_not_installed(installed):
    assert gating.unmet({"jax-cuda12-plugin": "0.10.2"}) == "needs jax-cuda12-plugin >= 0.10.2, which is not installed"
    assert gating.unmet({"jax-cuda12-plugin": "0"}) == "needs jax-cuda12-plugin, which is not installed"


def test_unmet_reads_the_dist_info_of_a_distribution_without_version_module(installed):
    installed.distribution("jax-cuda12-pjrt", "0.10.2", {"jax_plugins/xla_cuda12/__init__.py": ""})
    assert gating.unmet({"jax-cuda12-pjrt": "0"}) is None
    assert gating.unmet({"jax-cuda12-pjrt": "0.11"}) == (
        "needs jax-cuda12-pjrt >= 0.11, installed jax-cuda12-pjrt 0.10.2")


def test_unmet_api_number_names_the_backend_and_the_first_release_providing_it(installed):
    installed.jaxlib("0.11.2", api=495)
    assert gating.unmet(api={"jaxlib_extension_version": 503}) == (
        "needs jaxlib_extension_version >= 503, installed jaxlib 0.11.2 provides 495 "
        "(first jaxlib release providing it: 0.12.0)")
    assert gating.unmet(api={"xla_extension_version": 10_000}).endswith("provides 495 (no jaxlib release yet)")


def test_unmet_joins_every_shortfall_in_one_line(installed):
    installed.jax("0.10.2", "0.10.1")
    installed.jaxlib("0.10.2", api=467)
    reason = gating.unmet({"jax": "0.11.0", "jaxlib": "0.10.2"}, {"jaxlib_extension_version": 480})
    assert reason == ("needs jax >= 0.11.0, installed jax 0.10.2; needs jaxlib_extension_version >= 480, "
                      "installed jaxlib 0.10.2 provides 467 (first jaxlib release providing it: 0.11.1)")


def test_unmet_api_number_without_backend(installed):
    reason = gating.unmet(api={"jaxlib_extension_version": 300})
    assert reason.startswith("needs jaxlib_extension_version >= 300: cannot read jaxlib_extension_version")
    assert "\n" not in reason


def test_unmet_refuses_an_unknown_api_number():
    with pytest.raises(ValueError, match="unknown API number 'jaxlib_version'; known: jaxlib_extension_version"):
        gating.unmet(api={"jaxlib_version": 1})


def test_api_number_files_that_cannot_be_read_give_none(tmp_path) -> None:
    from jaxrel.gating import read_api_number

    (tmp_path / "client.py").write_bytes(b"# \xff\xfe not utf-8\n_version = 42\n")
    assert read_api_number("client.py", "_version", [str(tmp_path)]) == 42  # undecodable bytes elsewhere
    (tmp_path / "client.py").write_text("_version = " + "9" * 5000 + "\n")
    assert read_api_number("client.py", "_version", [str(tmp_path)]) is None  # over Python's digit limit
    assert read_api_number("client.py", "_version", [tmp_path, b"x", str(tmp_path / "none")]) is None  # type: ignore[list-item]
