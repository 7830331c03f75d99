"""libtpu against the tpu extra's pin: a warning in the policy, `verdict` and `doctor`, never a refusal."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from jaxrel import policy
from jaxrel.cli import main
from jaxrel.family import resolve_family

JAX = policy.Pin("jax", Version("0.12.0.1"))


@pytest.mark.parametrize(("libtpu", "pin", "outside"), [
    ("0.0.50", "==0.0.50.*", False),
    ("0.0.50.1", "==0.0.50.*", False),  # the post-release style libtpu uses: inside the prefix pin
    ("0.0.49", "==0.0.50.*", True),
    ("0.0.51", "==0.0.50.*", True),
    ("0.0.10", "==0.0.10", False),
    ("0.0.10.1", "==0.0.10", True),  # an exact pin (jax 0.5.1) admits nothing else
    ("0.1.dev20241010+nightly.cleanup", "==0.1.dev20241010+nightly.cleanup", False),  # libtpu-nightly
])
def test_runtime_within_pin(libtpu: str, pin: str, outside: bool) -> None:
    found = policy.runtime_within_pin(policy.Pin("libtpu", Version(libtpu)), pin, "tpu", JAX)
    assert (found is not None) == outside
    if found is not None:
        assert found.rule == policy.Rule.RUNTIME_WITHIN_EXTRA_PIN
        assert f"libtpu {Version(libtpu)} is outside jax 0.12.0.1[tpu]'s pin libtpu{pin}" in found.message
        assert found.fix == f'pip install "libtpu{pin}"'


def test_a_pin_that_is_not_a_specifier_is_bad_input() -> None:
    with pytest.raises(policy.VersionError, match="not a PEP 440 specifier"):
        policy.runtime_within_pin(policy.Pin("libtpu", Version("0.0.50")), "=0.0.50", "tpu")


def test_the_verdict_warns_and_stays_compatible() -> None:
    libtpu = policy.Pin("libtpu", Version("0.0.40"))
    result = policy.verdict(backend=policy.Pin("jaxlib", Version("0.12.0.1")), frontend=JAX,
                            minimum_backend=Version("0.11.2"), plugins=[libtpu], exempt_plugins=["libtpu"],
                            runtime_pins={"libtpu": ("tpu", "==0.0.50.*")})
    assert result.compatible and policy.Rule.RUNTIME_WITHIN_EXTRA_PIN in result.checked
    assert [w.rule for w in result.warnings] == [policy.Rule.RUNTIME_WITHIN_EXTRA_PIN]
    unknown = policy.verdict(backend=policy.Pin("jaxlib", Version("0.12.0.1")), frontend=JAX, plugins=[libtpu],
                             exempt_plugins=["libtpu"])
    assert policy.Rule.RUNTIME_WITHIN_EXTRA_PIN in unknown.skipped and not unknown.warnings


def test_the_jax_profile_knows_each_releases_tpu_pin_from_its_metadata() -> None:
    family = resolve_family(None)
    assert family.runtime_pins(JAX) == {"libtpu": ("tpu", "==0.0.50.*")}
    assert family.runtime_pins(policy.Pin("jax", Version("0.5.1"))) == {"libtpu": ("tpu", "==0.0.10")}
    assert family.runtime_pins(policy.Pin("jax", Version("0.0.1"))) == {}


def test_verdict_cli_prints_the_warning_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verdict", "jax==0.12.0.1", "jaxlib==0.12.0.1", "libtpu==0.0.40"]) == 0
    out = capsys.readouterr().out
    assert "jax 0.12.0.1, jaxlib 0.12.0.1, libtpu 0.0.40: compatible" in out
    assert "! runtime-within-extra-pin: libtpu 0.0.40 is outside jax 0.12.0.1[tpu]'s pin libtpu==0.0.50.*" in out
    assert main(["verdict", "jax==0.12.0.1", "jaxlib==0.12.0.1", "libtpu==0.0.50.1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["warnings"] == [] and "runtime-within-extra-pin" in data["rules_checked"]
