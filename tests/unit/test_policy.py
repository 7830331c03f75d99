"""The policy's rules, real pairs measured from released wheels, and version semantics."""

from __future__ import annotations

import pytest
from packaging.version import Version

from jaxrel import policy
from jaxrel.policy import Pin, parse_version, verdict

V = Version


def judge(jax: str | None, jaxlib: str, minimum: str | None, plugins=(), exempt=(), released=None):
    return verdict(
        frontend=Pin("jax", V(jax)) if jax else None,
        backend=Pin("jaxlib", V(jaxlib)),
        minimum_backend=V(minimum) if minimum else None,
        plugins=[Pin(n, V(v)) for n, v in plugins],
        exempt_plugins=exempt,
        released_backends=[V(r) for r in released] if released else None,
    )


# (jax, jaxlib, jax's declared minimum, real jax's import verdict) — measured by installing each
# pair with --no-deps and importing jax (2026-11).
REAL_PAIRS = [
    ("0.12.0.1", "0.11.0", "0.11.2", False),  # refused: below minimum 0.11.2
    ("0.12.0", "0.12.0.1", "0.11.2", False),  # refused: jaxlib newer than jax
    ("0.12.0.1", "0.12.0", "0.11.2", True),   # accepted, computes
    ("0.10.2", "0.6.2", "0.10.1", False),     # refused: below minimum 0.10.1
    ("0.6.2", "0.10.2", "0.6.2", False),      # refused: jaxlib newer
    # Declared ranges of real releases: both ends accepted.
    ("0.4.30", "0.4.27", "0.4.27", True),
    ("0.4.30", "0.4.30", "0.4.27", True),
    ("0.10.2", "0.10.1", "0.10.1", True),
    ("0.12.0", "0.11.2", "0.11.2", True),
    ("0.12.0.1", "0.12.0.1", "0.11.2", True),
    # jax at HEAD against released jaxlib, as real jax accepts it.
    ("0.4.36.dev20241119+gabc", "0.4.35", "0.4.35", True),
    ("0.4.36.dev20241119+gabc", "0.4.36", "0.4.35", True),
    ("0.4.36.dev20241119+gabc", "0.4.38", "0.4.35", False),
]


@pytest.mark.parametrize(("jax", "jaxlib", "minimum", "accepted"), REAL_PAIRS)
def test_real_pairs_agree_with_real_jax(jax, jaxlib, minimum, accepted):
    assert judge(jax, jaxlib, minimum).compatible is accepted


def test_refusal_names_rule_range_and_fix():
    result = judge("0.12.0.1", "0.11.0", "0.11.2")
    assert [v.rule for v in result.violations] == ["backend-at-least-minimum"]
    assert "0.11.2 <= jaxlib <= 0.12.0.1" in result.violations[0].message
    assert result.fix == 'pip install "jaxlib>=0.11.2,<=0.12.0.1"'
    newer = judge("0.12.0", "0.12.0.1", "0.11.2")
    assert [v.rule for v in newer.violations] == ["backend-not-newer-than-frontend"]
    assert newer.fix == 'pip install "jaxlib>=0.11.2,<=0.12.0"'
    assert newer.alternatives == ("pip install --upgrade jax jaxlib",)


def test_dev_frontend_fix_uses_its_release_number():
    result = judge("0.4.36.dev20241119+gabc", "0.4.34", "0.4.35")
    assert result.fix == 'pip install "jaxlib>=0.4.35,<=0.4.36"'


# --- every rule: positive and negative -------------------------------------------------


def test_backend_at_least_minimum():
    assert "backend-at-least-minimum" in judge("0.5.0", "0.5.0", "0.5.0").checked
    assert not judge("0.5.0", "0.5.0", "0.5.0").violations
    assert judge("0.5.0", "0.4.38", "0.5.0").violations[0].rule == "backend-at-least-minimum"


def test_backend_not_newer_than_frontend():
    assert judge("0.5.1", "0.5.0", "0.5.0").compatible
    assert judge("0.5.0", "0.5.1", "0.5.0").violations[0].rule == "backend-not-newer-than-frontend"


def test_minimum_not_newer_than_frontend():
    assert judge("0.5.1", "0.5.1", "0.5.1").compatible
    rules = [v.rule for v in judge("0.5.0", "0.5.0", "0.5.1").violations]
    assert "minimum-not-newer-than-frontend" in rules


def test_minimum_is_released():
    released = ["0.4.31", "0.4.33", "0.4.34"]
    assert judge("0.4.34", "0.4.34", "0.4.33", released=released).compatible
    assert not judge("0.4.34", "0.4.34", "0.4.33", released=released).warnings
    missing = judge("0.4.34", "0.4.33", "0.4.32", released=released)
    assert missing.compatible  # a release-rule finding: the pins themselves work together
    assert [w.rule for w in missing.warnings] == ["minimum-is-released"]
    assert "0.4.31" in missing.warnings[0].message  # names the nearest older release
    for unreleased in ("0.5.0rc1", "0.5.0.dev20250101", "0.5.0+local"):
        result = judge("0.5.0", "0.5.0", unreleased)
        assert [w.rule for w in result.warnings] == ["minimum-is-released"], unreleased
    assert not judge("0.5.0", "0.5.0", "0.5.0.post1").warnings  # a post-release is a release
    # older than the release data reaches: unknown, not "never released"
    assert not judge("0.4.34", "0.4.31", "0.4.11", released=released).warnings


def test_plugins_equal_backend_and_rocm_exempt():
    both = [("jax-cuda12-plugin", "0.12.0.1"), ("jax-cuda12-pjrt", "0.12.0.1")]
    ok = judge("0.12.0.1", "0.12.0.1", "0.11.2", plugins=both)
    assert ok.compatible and "plugin-matches-backend" in ok.checked
    bad = judge("0.12.0.1", "0.12.0.1", "0.11.2", plugins=[("jax-cuda12-plugin", "0.12.0"), both[1]])
    assert [v.rule for v in bad.violations] == ["plugin-matches-backend"]
    assert bad.fix == 'pip install "jax-cuda12-plugin==0.12.0.1"'
    newer = judge("0.10.2", "0.10.2", "0.10.1", plugins=[("jax-cuda12-plugin", "0.11.0")])
    assert not newer.compatible
    rocm = judge("0.10.2", "0.10.2", "0.10.1", plugins=[("jax-rocm7-plugin", "0.9.1")], exempt=["jax-rocm7-plugin"])
    assert rocm.compatible


def test_missing_inputs_are_reported_as_skipped_not_passed():
    result = judge(None, "0.5.0", None)
    assert result.compatible
    assert set(result.skipped) == {
        "backend-at-least-minimum", "backend-not-newer-than-frontend",
        "minimum-not-newer-than-frontend", "minimum-is-released", "plugin-matches-backend",
    }
    assert result.checked == ()


def test_every_violation_is_in_json():
    data = judge("0.5.0", "0.5.1", "0.6.0", plugins=[("jax-cuda12-plugin", "0.5.0")]).to_json()
    assert data["compatible"] is False
    assert {r["rule"] for r in data["reasons"]} == {
        "backend-at-least-minimum", "backend-not-newer-than-frontend",
        "minimum-not-newer-than-frontend", "plugin-matches-backend",
    }
    # the minimum is newer than the frontend: no pip range can help, the fix is the minimum itself
    assert data["fix"] == "lower the minimum jaxlib to at most 0.5.0"


# --- how versions take part --------------------------------------------------------------


@pytest.mark.parametrize(
    ("jax", "jaxlib", "minimum", "accepted"),
    [
        ("0.5.0rc1", "0.5.0", "0.4.38", True),        # pre-release frontend admits its own line
        ("0.5.0", "0.5.0rc1", "0.5.0", True),         # pre-release backend counts as its line
        ("0.12.0.post1", "0.12.0", "0.11.2", True),   # post ignored
        ("0.12.0", "0.12.0.post1", "0.11.2", True),
        ("0.12.0", "0.12.0+cuda", "0.11.2", True),    # local ignored
        ("0.4.30", "0.4.30.0", "0.4.27", True),       # trailing zero insignificant
        ("0.12.0", "0.12.0.1", "0.11.2", False),      # a fourth component is a newer release
        ("0.12.0.1", "0.12.0.1.dev1", "0.11.2", True),
    ],
)
def test_suffixes_and_spelling(jax, jaxlib, minimum, accepted):
    assert judge(jax, jaxlib, minimum).compatible is accepted


@pytest.mark.parametrize("text", ["1!0.4.30", "0!0.4.30"])
def test_epoch_is_refused_with_a_clear_error(text):
    with pytest.raises(policy.VersionError, match="epoch"):
        parse_version(text, "jaxlib")


@pytest.mark.parametrize("text", ["banana", "", "0.4.", "0.4.30-", "=0.4.30"])
def test_malformed_version_names_the_input(text):
    with pytest.raises(policy.VersionError, match="not a PEP 440 version") as info:
        parse_version(text, "jaxlib")
    assert "jaxlib" in str(info.value) and "\n" not in str(info.value)


# --- release-plan rules -----------------------------------------------------------------

RELEASED = [V(v) for v in ("0.4.35", "0.4.36", "0.4.38", "0.5.0")]


def plan(frontend, backend, minimum, released=RELEASED):
    return [v.rule for v in policy.check_release(
        frontend="jax", backend="jaxlib",
        frontend_version=V(frontend) if frontend else None,
        backend_version=V(backend) if backend else None,
        minimum_backend=V(minimum), released_backends=released,
    )]


def test_minimum_older_than_the_data_counts_only_when_the_data_is_complete():
    def rules(complete: bool) -> list[str]:
        return [v.rule for v in policy.check_release(
            frontend="jax", backend="jaxlib", frontend_version=V("0.5.1"), backend_version=None,
            minimum_backend=V("0.4.30"), released_backends=RELEASED, released_complete=complete)]

    assert rules(complete=False) == []  # release data that starts at 0.4.35 cannot tell
    assert rules(complete=True) == ["minimum-is-released"]  # an index listing can


def test_frontend_alone_may_be_released():
    assert plan("0.5.1", None, "0.5.0") == []


def test_backend_release_needs_frontend_release():
    assert plan("0.5.1", "0.5.1", "0.5.0") == []
    assert plan(None, "0.5.1", "0.5.0") == ["backend-release-has-frontend-release"]
    assert plan("0.5.2", "0.5.1", "0.5.0") == ["backend-release-has-frontend-release"]


def test_frontend_supports_latest_backend_release():
    assert plan("0.5.1.dev20250101", None, "0.5.0") == []
    # minimum newer than every release: the latest release is not supported
    assert "frontend-supports-latest-backend" in plan("0.5.1.dev20250101", None, "0.5.1")
    # frontend version behind the latest backend release
    assert "frontend-supports-latest-backend" in plan("0.4.38", None, "0.4.36")


def test_every_real_release_accepts_its_declared_range_and_refuses_its_neighbours():
    """Measured release data: each jax release with jaxlib at both ends of its declared range."""
    from jaxrel.family import jax_profile

    family = jax_profile()
    released = sorted(family.released_backends() or [])
    checked = 0
    for jax_version, minimum in family.frontend_minimums.items():
        jax_v, minimum_v = V(jax_version), V(minimum)
        inside = [b for b in released if minimum_v <= b <= jax_v]
        for backend in (inside[:1] + inside[-1:]):
            result = judge(jax_version, str(backend), minimum, released=map(str, released))
            assert result.compatible, (jax_version, str(backend), result.violations)
            if minimum_v not in released and minimum_v > released[0]:
                # e.g. jax 0.4.18 declares jaxlib 0.4.14, which the index does not offer
                assert [w.rule for w in result.warnings] == ["minimum-is-released"], jax_version
            checked += 1
        below = [b for b in released if b < minimum_v]
        above = [b for b in released if b > jax_v]
        for backend in below[-1:] + above[:1]:
            assert not judge(jax_version, str(backend), minimum).compatible, (jax_version, str(backend))
            checked += 1
    assert checked > 100
