"""Gates on the backend's release tuple (issue #14): found through every spelling jax used, judged on
release numbers, reported and fixed like API-number gates.

Every tree declares jax 0.10.2 with minimum jaxlib 0.10.1: the supported releases are 0.10.1 and
0.10.2, and a jaxlib built at the tree's HEAD is 0.10.2 too (jax and jaxlib share versions). So
``jaxlib_version < (0, 10)`` and ``< (0, 10, 1)`` are always false, ``>= (0, 10, 1)`` always true,
``>= (0, 10, 2)`` live.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from jaxrel.family import jax_profile
from jaxrel.gates.fix import fix_tree
from jaxrel.gates.judge import Comparison, Releases, find_gates, judge_all, release_tuple

VERSION_PY = '_version = "0.10.2"\n_minimum_jaxlib_version = "0.10.1"\n'
RELEASES = ("0.10.1", "0.10.2")


def _src(text: str) -> str:
    return textwrap.dedent(text).removeprefix("\n")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in {"jax/version.py": VERSION_PY, **files}.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def _judged(tree: Path) -> list[tuple[str, int, str, str, str]]:
    family = jax_profile()
    found, failed = find_gates(tree, family)
    assert failed == {}
    releases = Releases.from_family(family, Version("0.10.1"), Version("0.10.2"))
    assert releases.supported == list(RELEASES)
    return [(j.gate.file, j.gate.line, j.gate.kind, " ".join(str(c) for c in j.gate.comparisons), j.verdict)
            for j in judge_all(found, releases)]


SPELLINGS = _src("""
    import unittest

    import jax
    from jax._src import lib as jaxlib
    from jax._src import test_util as jtu
    from jax._src.lib import version as jaxlib_version
    import jax._src.lib

    parsed = jtu.parse_version(jax.lib.__version__)
    helper = jtu.jaxlib_version()


    @unittest.skipIf(jaxlib_version < (0, 10, 1), "needs jaxlib 0.10.1")
    def test_a():
        if jaxlib_version < (0, 10):
            old()
        x = new() if jaxlib.version >= (0, 10, 1) else old()
        if jtu.jaxlib_version() >= (0, 10, 2):
            newest()
        if (0, 9) <= jaxlib.version:
            fine()
        if parsed < (0, 10, 1) or helper >= (0, 11):
            never()
        assert jax._src.lib.version >= (0, 10, 1)
""")

NOT_GATES = _src("""
    import sys

    import jax
    import numpy as np
    from jax.version import __version_info__
    from jax._src.lib import version as jaxlib_version

    numpy_version = tuple(map(int, np.__version__.split(".")[:2]))
    if numpy_version < (2, 0):
        a = 1
    if sys.version_info >= (3, 12):
        b = 1
    if __version_info__ < (0, 4):
        c = 1
    if jax.version.__version_info__ >= (0, 10):
        d = 1
    if jaxlib_version < minimum:
        e = 1
    if jaxlib_version == "0.10.1":
        f = 1
""")


def test_every_spelling_of_the_release_is_found_and_judged(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"tests/spell_test.py": SPELLINGS, "tests/other_test.py": NOT_GATES})
    assert _judged(tree) == [
        ("tests/spell_test.py", 13, "skip-decorator", "jaxlib < (0, 10, 1)", "always-false"),
        ("tests/spell_test.py", 15, "if", "jaxlib < (0, 10)", "always-false"),
        ("tests/spell_test.py", 17, "ternary", "jaxlib >= (0, 10, 1)", "always-true"),
        ("tests/spell_test.py", 18, "if", "jaxlib >= (0, 10, 2)", "live"),
        ("tests/spell_test.py", 20, "if", "jaxlib >= (0, 9)", "always-true"),
        ("tests/spell_test.py", 22, "if", "jaxlib < (0, 10, 1) jaxlib >= (0, 11)", "always-false"),
        ("tests/spell_test.py", 24, "assert", "jaxlib >= (0, 10, 1)", "always-true"),
    ]


def test_the_release_inside_jax_lib_itself(tmp_path: Path) -> None:
    """``version`` at the top of jax/_src/lib/__init__.py is the release, as ``jax._src.lib.version`` elsewhere."""
    lib = "version = check_jaxlib_version()\nif version >= (0, 10, 1):\n    new = 1\n"
    tree = _tree(tmp_path, {"jax/_src/lib/__init__.py": lib, "jax/_src/other.py": lib})
    assert _judged(tree) == [("jax/_src/lib/__init__.py", 2, "if", "jaxlib >= (0, 10, 1)", "always-true")]


def test_a_tree_passed_as_the_package_directory_names_its_modules_by_the_package(tmp_path: Path) -> None:
    lib = "version = check_jaxlib_version()\nif version >= (0, 10, 1):\n    new = 1\n"
    tree = _tree(tmp_path, {"jax/__init__.py": "", "jax/_src/__init__.py": "", "jax/_src/lib/__init__.py": lib})
    family = jax_profile()
    found, _ = find_gates(tree / "jax", family)
    assert [(g.file, g.line) for g in found] == [("_src/lib/__init__.py", 2)]


def test_release_gates_are_fixed_like_api_number_gates(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"tests/spell_test.py": SPELLINGS})
    family = jax_profile()
    found, _ = find_gates(tree, family)
    fixed = fix_tree(tree, judge_all(found, Releases.from_family(family, Version("0.10.1"), Version("0.10.2"))))
    assert fixed.changed["tests/spell_test.py"] == "\n" + _src("""
        import jax
        from jax._src import test_util as jtu
        import jax._src.lib

        parsed = jtu.parse_version(jax.lib.__version__)
        helper = jtu.jaxlib_version()


        def test_a():
            x = new()
            if jtu.jaxlib_version() >= (0, 10, 2):
                newest()
            fine()
    """)
    assert fixed.files["tests/spell_test.py"][1].changed == [
        "13: skip decorator never skips: removed", "15: if always false: kept nothing",
        "17: ternary: kept its true side", "20: if always true: kept its body", "22: if always false: kept nothing",
        "24: assert always holds: removed",
        "import jaxlib: no longer used, removed", "import jaxlib_version: no longer used, removed",
        "import unittest: no longer used, removed"]


@pytest.mark.parametrize(("op", "threshold", "value", "holds"), [
    (">=", (0, 10), (0, 10, 1), True), ("<", (0, 10), (0, 9, 9), True), ("<", (0, 10), (0, 10), False),
    (">", (0, 10), (0, 10, 0), True), ("==", (0, 10, 1), (0, 10, 1), True), ("<=", (0, 9, 0, 1), (0, 9), True),
])
def test_release_comparisons_are_pythons_tuple_order(op: str, threshold: tuple[int, ...], value: tuple[int, ...],
                                                     holds: bool) -> None:
    assert Comparison("jaxlib", op, threshold, 1, 0).holds(value) is holds


def test_an_api_number_never_equals_a_release() -> None:
    assert Comparison("jaxlib", ">=", (0, 10), 1, 0).holds(500) is False


def test_release_tuple_is_the_dotted_prefix() -> None:
    assert release_tuple("0.9.0.1") == (0, 9, 0, 1) and release_tuple("0.10.2") == (0, 10, 2)


def test_a_release_beyond_every_known_one_is_ahead(tmp_path: Path) -> None:
    """The tree's own version 0.10.3 (unknown to the release data) is what a jaxlib built at its HEAD reports."""
    tree = _tree(tmp_path, {"jax/version.py": '_version = "0.10.3"\n_minimum_jaxlib_version = "0.10.1"\n',
                            "jax/_src/m.py": "from jax._src.lib import version as v\nif v >= (0, 10, 3):\n  x = 1\n"})
    family = jax_profile()
    found, _ = find_gates(tree, family)
    releases = Releases.from_family(family, Version("0.10.1"), Version("0.10.3"))
    assert [j.verdict for j in judge_all(found, releases)] == ["ahead"]
    assert [j.first_releases for j in judge_all(found, releases)] == [{"jaxlib >= (0, 10, 3)": "0.11.0"}]


def test_jaxlib_version_info_is_the_release(tmp_path: Path) -> None:
    module = _src("""
        import jaxlib.version
        from jaxlib import version as jv
        from jaxlib.version import __version_info__ as info

        a = 1 if jaxlib.version.__version_info__ >= (0, 10, 1) else 0
        b = 1 if jv.__version_info__ >= (0, 10, 2) else 0
        c = 1 if info < (0, 4, 11) else 0
    """)
    tree = _tree(tmp_path, {"jax/_src/m.py": module})
    assert [(line, verdict) for _, line, _, _, verdict in _judged(tree)] == [
        (5, "always-true"), (6, "live"), (7, "always-false")]
