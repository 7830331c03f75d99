"""Property tests: spelling never matters, widening never refuses, guard == policy."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import InvalidVersion, Version

from jaxrel import guard, policy
from jaxrel.policy import Pin

PRE = ["a", "b", "rc", "alpha", "beta", "c", "pre", "preview"]


@st.composite
def versions(draw, final: bool = False) -> str:
    """A valid PEP 440 version string (no epoch), spelled canonically."""
    release = ".".join(str(n) for n in draw(st.lists(st.integers(0, 12), min_size=1, max_size=4)))
    if final:
        return release
    text = release
    if draw(st.booleans()):
        text += f"{draw(st.sampled_from(PRE))}{draw(st.integers(0, 3))}"
    if draw(st.booleans()):
        text += f".post{draw(st.integers(0, 3))}"
    if draw(st.booleans()):
        text += f".dev{draw(st.integers(0, 20250101))}"
    if draw(st.booleans()):
        segments = draw(st.lists(st.text(alphabet="abcxyz0123456789", min_size=1, max_size=5), min_size=1, max_size=2))
        text += "+" + ".".join(segments)
    return text


@st.composite
def respelled(draw, text: str) -> str:
    """The same version spelled differently: zero padding, ``v`` prefix, case, separators."""
    version = Version(text)
    release = ".".join(str(n) for n in version.release) + ".0" * draw(st.integers(0, 2))
    out = draw(st.sampled_from(["", "v", "V"])) + release
    if version.pre:
        letter = {"a": "alpha", "b": "beta", "rc": draw(st.sampled_from(["rc", "c", "pre", "preview"]))}[version.pre[0]]
        separators = draw(st.sampled_from(["", "-", ".", "_"])), draw(st.sampled_from(["", "-", "."]))
        out += f"{separators[0]}{letter}{separators[1]}{version.pre[1]}"
    if version.post is not None:
        out += draw(st.sampled_from([f".post{version.post}", f"-post{version.post}", f"_rev{version.post}",
                                     f".r{version.post}", f"-{version.post}"]))
    if version.dev is not None:
        out += draw(st.sampled_from([f".dev{version.dev}", f"-dev{version.dev}", f"dev{version.dev}"]))
    if version.local:
        out += "+" + version.local.replace(".", draw(st.sampled_from([".", "-", "_"])))
    return draw(st.sampled_from([out, out.upper(), f"  {out} "]))


def outcome(jax: str, jaxlib: str, minimum: str, plugin: str | None = None):
    result = policy.verdict(
        frontend=Pin("jax", Version(jax)), backend=Pin("jaxlib", Version(jaxlib)),
        minimum_backend=Version(minimum),
        plugins=[Pin("jax-cuda12-plugin", Version(plugin))] if plugin else [],
    )
    return result.compatible, [v.rule for v in result.violations]


@given(data=st.data(), jax=versions(), jaxlib=versions(), minimum=versions(final=True), plugin=versions())
def test_verdict_never_depends_on_spelling(data, jax, jaxlib, minimum, plugin):
    spelled = [data.draw(respelled(v)) for v in (jax, jaxlib, minimum, plugin)]
    assert all(Version(s) == Version(v) for s, v in zip(spelled, (jax, jaxlib, minimum, plugin), strict=True))
    assert outcome(*spelled) == outcome(jax, jaxlib, minimum, plugin)


@given(jax=versions(), jaxlib=versions(), minimum=versions(final=True), lower=versions(final=True))
def test_widening_the_minimum_never_refuses_an_accepted_backend(jax, jaxlib, minimum, lower):
    if Version(lower) > Version(minimum):
        lower, minimum = minimum, lower
    accepted, _ = outcome(jax, jaxlib, minimum)
    if accepted:
        assert outcome(jax, jaxlib, lower)[0]


@given(text=versions())
def test_guard_reads_releases_exactly_as_packaging(text):
    version = Version(text)
    assert guard.release_of(text).key == policy.release_key(version)
    assert guard.release_of(text).text == policy.release_text(version)


@given(text=st.text(alphabet=string.digits + ".-_+!abcdeloprstv ", max_size=14))
def test_guard_accepts_exactly_what_packaging_accepts(text):
    try:
        Version(text)
        valid = "!" not in text
    except InvalidVersion:
        valid = False
    try:
        guard.release_of(text)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == valid


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("site")


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jax=versions(), jaxlib=versions(), minimum=versions(final=True), plugin=st.none() | versions())
def test_guard_agrees_with_policy(site, jax, jaxlib, minimum, plugin):
    for entry in site.iterdir():
        if entry.is_dir() and entry.name.endswith(".dist-info"):
            entry.rmdir()
    (site / "jaxlib").mkdir(exist_ok=True)
    (site / "jaxlib" / "version.py").write_text(f'_version = "{jaxlib}"\n')
    if plugin:
        (site / f"jax_cuda12_plugin-{plugin}.dist-info").mkdir()
    try:
        guard.check(frontend="jax", frontend_version=jax, backend="jaxlib", minimum_backend=minimum,
                    plugins=(guard.Plugin("jax-cuda12-plugin"),), path=[str(site)])
        refused = False
    except guard.GuardError:
        refused = True
    assert refused == (not outcome(jax, jaxlib, minimum, plugin)[0])


def splitlines_assigned_string(source: str, variables: tuple[str, ...]) -> str | None:
    """The guard's original reading of ``name = "..."``: every line, from ``str.splitlines``."""
    lines = source.splitlines()
    for variable in variables:
        for line in lines:
            if not line.startswith(variable):
                continue
            rest = line[len(variable):].lstrip()
            if rest[:1] == ":":
                rest = rest[rest.find("="):] if "=" in rest else ""
            value = rest[1:].strip() if rest[:1] == "=" else ""
            if value[:1] in ("'", '"') and value.find(value[0], 1) > 1:
                return value[1:value.find(value[0], 1)]
    return None


@settings(max_examples=500)
@given(pieces=st.lists(st.sampled_from(["_version", "_release_version", "__version__", "x_version", " ", "=", ":",
                                        "str | None", '"', "'", "0.4.30", "None", "#", "\n", "\r\n", "\r", "\x0b",
                                        "\x1c", "\x85", "\u2028"]), max_size=16))
def test_guard_finds_assignments_as_reading_every_line_does(pieces):
    source = "".join(pieces)
    variables = ("_release_version", "_version", "__version__")
    assert guard.assigned_string(source, variables) == splitlines_assigned_string(source, variables)
