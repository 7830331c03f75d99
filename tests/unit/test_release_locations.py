"""Version locations: exact reads and byte-preserving rewrites of Python, Starlark and TOML."""

from __future__ import annotations

import pytest

from jaxrel.release.config import Location
from jaxrel.release.locations import LocationError, read_text, requirement_on, rewrite, rewrite_requirement

PY = '''"""Version."""
# the release
_version: str = '0.4.30'  # keep in sync
_release_version: str | None = None
_minimum = "0.4.27"
'''
TOML = '''[project]
name = "x"  # the name
version = "1.0.0"   # the version
dependencies = [
  "numpy>=1.26",
  "core[fast]>=1.0.0,<=1.0.0; python_version >= '3.11'",  # the backend
]
'''


def test_reads_annotated_plain_and_none() -> None:
    assert read_text(PY, Location("v.py", "_version")) == "0.4.30"
    assert read_text(PY, Location("v.py", "_minimum")) == "0.4.27"
    assert read_text(PY, Location("v.py", "_release_version")) is None
    assert read_text(TOML, Location("pyproject.toml", "project.version")) == "1.0.0"


def test_rewrite_python_changes_only_the_literal() -> None:
    new = rewrite(PY, Location("v.py", "_version"), "0.5.0")
    assert new == PY.replace("'0.4.30'", "'0.5.0'")


def test_rewrite_toml_keeps_comments_and_layout() -> None:
    new = rewrite(TOML, Location("pyproject.toml", "project.version"), "1.1.0")
    assert new == TOML.replace('"1.0.0"', '"1.1.0"')


def test_rewrite_requirement_keeps_extras_markers_and_others() -> None:
    new = rewrite_requirement(TOML, "core", ">=1.0.0,<=1.1.0")
    found = requirement_on(new, "core")
    assert found is not None and found[0] == 1
    assert str(found[1].specifier) == "<=1.1.0,>=1.0.0"
    assert found[1].extras == {"fast"} and str(found[1].marker) == 'python_version >= "3.11"'
    assert '"numpy>=1.26",' in new and "# the version" in new and "# the backend" in new


@pytest.mark.parametrize(("text", "location", "message"), [
    (PY, Location("v.py", "_missing"), "no top-level `_missing"),
    ("_version = 3\n", Location("v.py", "_version"), "not a string literal"),
    ("def (:\n", Location("v.py", "_version"), "does not parse"),
    (TOML, Location("pyproject.toml", "project.nope"), "no key 'project.nope'"),
    ('[project]\ndynamic = ["version"]\n', Location("pyproject.toml", "project.version"), "it is dynamic"),
    ("[project\n", Location("pyproject.toml", "project.version"), "not valid TOML"),
])
def test_bad_locations_are_one_line(text: str, location: Location, message: str) -> None:
    with pytest.raises(LocationError) as raised:
        read_text(text, location)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_rewriting_none_writes_the_build_stamp_in_its_place() -> None:
    """``_release_version = None`` takes a version only when the build stamps it (``bump --nightly`` of a family
    declaring it ``stamped``); a plain bump leaves it None (tests/unit/test_release_bump_check.py)."""
    stamped = rewrite(PY, Location("v.py", "_release_version"), "1.0.dev20260701")
    assert read_text(stamped, Location("v.py", "_release_version")) == "1.0.dev20260701"
    assert stamped.replace('"1.0.dev20260701"', "None") == PY
