"""api-version gates: the finder (jaxrel.gates.find), the judge (jaxrel.gates.judge), the report and ``jaxrel gates``.

The fixture tree ``tests/data/gates_tree`` holds every spelling of a gate; it is only parsed, never
imported (no ``test_`` file names, and ``tests/data`` is no test package). Its declared minimum is
jaxlib 0.10.1 (API number 452) and its own version 0.12.0.1 caps the supported releases; the newest
supported release's number is 505 (0.12.0 / 0.12.0.1). Thresholds: 100/300 below the minimum's number,
460/470/477/500 between supported releases, 505 at the newest, 600 above it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from packaging.version import Version

from jaxrel import cli
from jaxrel.distributions.pythons import find_pythons
from jaxrel.family import jax_profile
from jaxrel.gates import find as gatefind
from jaxrel.gates import judge as gates
from jaxrel.gates import report as gatereport
from jaxrel.gates.judge import Comparison, Gate, Releases, evaluate, judge

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "tests" / "data" / "gates_tree"
JAXLIB: dict[str, dict[str, Any]] = json.loads((REPO / "jaxrel" / "data" / "jax.json").read_text())["jaxlib"]

TREE_VERSION = "0.12.0.1"  # tests/data/gates_tree/jax/version.py
J, IFRT = "jaxlib_extension_version", "ifrt_version"
NAMES = {"jaxlib_extension_version": J, "xla_extension_version": J, "ifrt_version": IFRT}
RAW = {("xla_client", "_version"): J, ("xla_client", "_ifrt_version"): IFRT}

C0: dict[str, Any] = {"cmp": [0]}
C01: dict[str, Any] = {"cmp": [0, 1]}
AND01: dict[str, Any] = {"and": [{"cmp": [0]}, {"cmp": [1]}]}
OR01: dict[str, Any] = {"or": [{"cmp": [0]}, {"cmp": [1]}]}


class Row(NamedTuple):
    file: str
    line: int
    kind: str
    comparisons: tuple[tuple[str, str, int], ...]  # (canonical number, op, threshold), number on the left
    condition: dict[str, Any]
    verdict: str  # for the tree's own minimum, jaxlib 0.10.1
    verdict_012: str  # with --min-backend 0.12.0


OPS, LOGIC, PLACES = "jax/_src/operators.py", "jax/_src/logic.py", "jax/_src/places.py"
SPELL, UNKNOWN, SKIPS = "jax/_src/spellings.py", "jax/_src/unknowns.py", "checks/skips.py"

# Every gate of the tree, in find_gates' order (file, line).
EXPECTED = [
    Row(SKIPS, 9, "skip-decorator", ((J, ">=", 600),), C0, "ahead", "ahead"),
    Row(SKIPS, 11, "skip-decorator", ((J, "<", 470),), C0, "live", "always-false"),
    Row(SKIPS, 15, "skip-decorator", ((J, ">=", 300),), C0, "always-true", "always-true"),
    Row(SKIPS, 19, "skip-decorator", ((J, "<", 300), (J, ">=", 600)), OR01, "ahead", "ahead"),
    Row(LOGIC, 7, "if", ((J, ">=", 470), (J, "<", 500)), AND01, "live", "always-false"),
    Row(LOGIC, 9, "if", ((J, "<", 300), (J, ">=", 600)), OR01, "ahead", "ahead"),
    Row(LOGIC, 11, "if", ((J, ">=", 470),), {"not": C0}, "live", "always-false"),
    Row(LOGIC, 13, "if", ((J, ">=", 300),), {"or": [C0, {"not": {"other": "ok"}}]}, "always-true", "always-true"),
    Row(LOGIC, 15, "if", ((J, ">=", 300), (J, "<", 600)), C01, "ahead", "ahead"),  # 300 <= v < 600
    Row(LOGIC, 17, "if", ((J, ">=", 460), (J, "<", 500)), C01, "live", "always-false"),  # 460 <= v < 500
    Row(OPS, 6, "if", ((J, ">=", 300),), C0, "always-true", "always-true"),
    Row(OPS, 8, "if", ((J, ">=", 300),), C0, "always-true", "always-true"),  # 300 <= v
    Row(OPS, 10, "if", ((J, ">", 470),), C0, "live", "always-true"),
    Row(OPS, 12, "if", ((J, ">", 470),), C0, "live", "always-true"),  # 470 < v
    Row(OPS, 14, "if", ((J, "<", 300),), C0, "always-false", "always-false"),
    Row(OPS, 16, "if", ((J, "<", 300),), C0, "always-false", "always-false"),  # 300 > v
    Row(OPS, 18, "if", ((J, "<=", 600),), C0, "ahead", "ahead"),
    Row(OPS, 20, "if", ((J, "<=", 600),), C0, "ahead", "ahead"),  # 600 >= v
    Row(OPS, 22, "if", ((J, "==", 300),), C0, "always-false", "always-false"),
    Row(OPS, 24, "if", ((J, "==", 477),), C0, "live", "always-false"),  # 477 == v
    Row(OPS, 26, "if", ((J, "!=", 600),), C0, "ahead", "ahead"),
    Row(OPS, 28, "if", ((J, "!=", 300),), C0, "always-true", "always-true"),  # 300 != v
    Row(PLACES, 14, "if", ((J, ">=", 600),), C0, "ahead", "ahead"),
    Row(PLACES, 16, "elif", ((J, ">=", 470),), C0, "live", "always-true"),
    Row(PLACES, 20, "ternary", ((J, ">", 505),), C0, "ahead", "ahead"),
    Row(PLACES, 21, "assert", ((J, ">=", 300),), C0, "always-true", "always-true"),
    Row(PLACES, 22, "while", ((J, "<", 300),), C0, "always-false", "always-false"),
    Row(PLACES, 24, "expression", ((J, ">=", 100),), C0, "always-true", "always-true"),  # x = v >= 100
    Row(PLACES, 25, "if", ((J, ">=", 470),), {"and": [C0, {"other": "x"}]}, "unknown", "unknown"),  # 2 lines
    Row(SPELL, 9, "if", ((J, ">=", 470),), C0, "live", "always-true"),  # import alias
    Row(SPELL, 11, "if", ((J, ">=", 470),), C0, "live", "always-true"),  # xla_extension_version
    Row(SPELL, 13, "if", ((J, ">=", 470),), C0, "live", "always-true"),  # lib.jaxlib_extension_version
    Row(SPELL, 15, "if", ((J, ">=", 470),), C0, "live", "always-true"),  # jax._src.lib.xla_extension_version
    Row(SPELL, 17, "if", ((J, ">=", 470),), C0, "live", "always-true"),  # xla_client._version
    Row(UNKNOWN, 14, "if", ((IFRT, ">=", 10),), C0, "unknown", "unknown"),  # lib.ifrt_version
    Row(UNKNOWN, 16, "if", ((J, ">=", 300),), {"or": [{"other": "TYPE_CHECKING"}, C0]}, "always-true", "always-true"),
    Row(UNKNOWN, 18, "if", ((J, ">=", 470),), {"or": [{"other": "TYPE_CHECKING"}, C0]}, "unknown", "always-true"),
    Row(UNKNOWN, 20, "if", ((J, ">=", 300),), {"and": [{"other": "flag"}, C0]}, "unknown", "unknown"),
    Row(UNKNOWN, 22, "if", ((J, ">=", 600),), {"and": [{"other": "flag"}, C0]}, "always-false", "always-false"),
    Row(UNKNOWN, 30, "if", ((IFRT, ">=", 10),), C0, "unknown", "unknown"),  # xla_client._ifrt_version
]
SKIPS_WHEN_TRUE = {(SKIPS, 9): True, (SKIPS, 11): True, (SKIPS, 15): False, (SKIPS, 19): True}
MULTI_LINE = {(PLACES, 25): 26}  # gate (file, line) -> end_line; every other gate sits on one line
SOURCES = {
    (OPS, 8): "300 <= jaxlib_extension_version",
    (LOGIC, 15): "300 <= v < 600",
    (LOGIC, 13): "v >= 300 or not ok",
    (PLACES, 20): "jaxlib_extension_version > 505",
    (PLACES, 24): "jaxlib_extension_version >= 100",
    (PLACES, 25): "jaxlib_extension_version >= 470\n        and x",
    (SPELL, 15): "jax._src.lib.xla_extension_version >= 470",
    (SKIPS, 19): "v < 300 or v >= 600",
}


def first_release(value: int) -> str | None:
    """The oldest jaxlib release in jax.json whose API number is at least ``value`` (read here, not via jaxrel)."""
    for version in sorted(JAXLIB, key=Version):
        number = JAXLIB[version].get(J)
        if isinstance(number, int) and number >= value:
            return version
    return None


def upper_side(op: str, threshold: int) -> int:
    """The smallest API number on the upper side of ``op threshold``."""
    return threshold + 1 if op in (">", "<=") else threshold


def releases(minimum: str = "0.10.1") -> Releases:
    """The releases ``jaxrel gates`` judges the tree over: from ``minimum`` up to the tree's own version."""
    return Releases.from_family(jax_profile(), Version(minimum), Version(TREE_VERSION))


@pytest.fixture(scope="module")
def found() -> tuple[list[Gate], dict[str, str]]:
    return gates.find_gates(TREE, jax_profile())


def make_gate(*comparisons: tuple[str, str, int], condition: dict[str, Any] | None = None) -> Gate:
    parts = tuple(Comparison(number, op, threshold, 1, 3) for number, op, threshold in comparisons)
    return Gate("f.py", 1, 3, 1, 20, "if", "cond", parts, condition or C0)


# -- the data the tables rely on --------------------------------------------------------------------


def test_release_data_the_tables_assume() -> None:
    numbers = {version: row[J] for version, row in JAXLIB.items()}
    supported = [v for v in numbers if Version("0.10.1") <= Version(v) <= Version(TREE_VERSION)]
    assert numbers["0.10.1"] == 452 and max(numbers[v] for v in supported) == 505 == numbers["0.12.0"]
    assert min(numbers[v] for v in supported) == 452
    # 470 splits the supported releases, 300 is below all of them, 600 above every one.
    assert {numbers[v] >= 470 for v in supported} == {True, False}
    assert max(numbers[v] for v in supported) < 600 and min(numbers[v] for v in supported) > 300
    assert 477 in numbers.values() and sum(numbers[v] == 477 for v in supported) == 1


# -- the finder ------------------------------------------------------------------------------------------


def test_finds_exactly_the_expected_gates(found: tuple[list[Gate], dict[str, str]]) -> None:
    gate_list, failed = found
    assert failed == {}
    actual = [(g.file, g.line, g.kind, tuple((c.number, c.op, c.threshold) for c in g.comparisons), g.condition)
              for g in gate_list]
    assert actual == [(r.file, r.line, r.kind, r.comparisons, r.condition) for r in EXPECTED]


def test_gate_positions_skip_flags_and_sources(found: tuple[list[Gate], dict[str, str]]) -> None:
    by_place = {(g.file, g.line): g for g in found[0]}
    for place, gate in by_place.items():
        assert gate.end_line == MULTI_LINE.get(place, gate.line), place
        assert gate.skips_when_true is SKIPS_WHEN_TRUE.get(place), place
        assert all(c.line == gate.line for c in gate.comparisons), place
    for place, source in SOURCES.items():
        assert by_place[place].source == source
    lines = (TREE / PLACES).read_text().splitlines()
    ternary = by_place[(PLACES, 20)]
    assert lines[ternary.line - 1][ternary.col:ternary.end_col] == "jaxlib_extension_version > 505"


def test_look_alikes_are_not_gates(found: tuple[list[Gate], dict[str, str]]) -> None:
    sources = {g.source for g in found[0]}
    text = (TREE / UNKNOWN).read_text()
    for look_alike in ("v >= MINIMUM", "my_jaxlib_extension_version_count >= 3", "lib._version > 2",
                       '"jaxlib_extension_version >= 470" in message'):
        assert look_alike in text  # the fixture does hold it ...
        assert not any(look_alike in s for s in sources)  # ... and the finder skips it
    assert not any(g.file == "jax/version.py" for g in found[0])


def test_find_in_source_normalises_operand_order() -> None:
    source = "from jax._src.lib import jaxlib_extension_version as v\nok = 470 < v\n"
    (gate,) = gatefind.find_in_source(source, "m.py", NAMES, RAW)
    assert gate["comparisons"] == [{"number": J, "op": ">", "threshold": 470, "line": 2, "col": 5}]
    assert (gate["kind"], gate["condition"], gate["source"]) == ("expression", C0, "470 < v")


@pytest.mark.parametrize(("written", "normalised"), [
    ("v >= 3", ">= 3"), ("3 <= v", ">= 3"), ("v > 3", "> 3"), ("3 < v", "> 3"), ("v < 3", "< 3"),
    ("3 > v", "< 3"), ("v <= 3", "<= 3"), ("3 >= v", "<= 3"), ("v == 3", "== 3"), ("3 == v", "== 3"),
    ("v != 3", "!= 3"), ("3 != v", "!= 3"),
])
def test_each_operator_in_either_order(written: str, normalised: str) -> None:
    source = f"from jax._src.lib import xla_extension_version as v\nflag = {written}\n"
    (gate,) = gatefind.find_in_source(source, "m.py", NAMES, RAW)
    (comparison,) = gate["comparisons"]
    assert f"{comparison['op']} {comparison['threshold']}" == normalised and comparison["number"] == J


def test_non_literal_and_bool_thresholds_are_not_gates() -> None:
    source = ("from jax._src.lib import jaxlib_extension_version as v\nLIMIT = 3\n"
              "a = v >= LIMIT\nb = v == True\nc = v >= -1\nd = v in (1, 2)\ne = 300 <= v < LIMIT\n")
    assert gatefind.find_in_source(source, "m.py", NAMES, RAW) == []


def test_alias_is_per_module() -> None:
    # `v` is the API number only where it was imported as such.
    source = "v = 3\nok = v >= 2\n"
    assert gatefind.find_in_source(source, "m.py", NAMES, RAW) == []


def test_raw_variable_through_an_aliased_module() -> None:
    source = "from jax._src.lib import xla_client as xc\nif xc._version >= 470:\n    pass\n"
    (gate,) = gatefind.find_in_source(source, "m.py", NAMES, RAW)
    assert gate["comparisons"][0]["number"] == J


def test_python_files_are_sorted_and_skip_build_and_hidden_directories(tmp_path: Path) -> None:
    for relative in ("b.py", "a.txt", "sub/a.py", "sub/deeper/c.py", "build/x.py", "dist/x.py", "__pycache__/x.py",
                     "node_modules/x.py", ".hidden/x.py", "a_dir/z.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("")
    assert list(gatefind.python_files(str(tmp_path))) == ["b.py", "a_dir/z.py", "sub/a.py", "sub/deeper/c.py"]


def test_scan_reports_unreadable_and_unparsable_files_but_skips_unrelated_ones(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes(b"# \xff\xfe\nx = 1\n")
    (tmp_path / "broken.py").write_text("x = 1\nif jaxlib_extension_version >= 300 :::\n    pass\n")
    (tmp_path / "unrelated_broken.py").write_text("def (:\n")
    files = ["latin1.py", "broken.py", "unrelated_broken.py", "missing.py"]
    found_gates, failed = gatefind.scan(str(tmp_path), files, NAMES, RAW)
    assert found_gates == []
    assert sorted(failed) == ["broken.py", "latin1.py", "missing.py"]
    python = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    assert failed["broken.py"].startswith("line 2: ") and failed["broken.py"].endswith(f"({python})")
    assert "decode" in failed["latin1.py"] and "No such file" in failed["missing.py"]


def test_gatefind_main_in_a_subprocess_matches_scan() -> None:
    files = list(gatefind.python_files(str(TREE)))
    request = {"root": str(TREE), "files": files, "names": NAMES,
               "raw": [[stem, variable, number] for (stem, variable), number in RAW.items()]}
    done = subprocess.run([sys.executable, "-m", "jaxrel.gates.find", json.dumps(request)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    in_process = gatefind.scan(str(TREE), files, NAMES, RAW)
    answer = json.loads(done.stdout)
    assert answer == json.loads(json.dumps({"gates": in_process[0], "failed": in_process[1]}))
    assert len(answer["gates"]) == len(EXPECTED)


def test_gatefind_main_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    request = {"root": str(TREE), "files": [OPS], "names": NAMES, "raw": []}
    assert gatefind.main([json.dumps(request)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [g["line"] for g in answer["gates"]] == [r.line for r in EXPECTED if r.file == OPS]
    assert answer["failed"] == {}


# -- syntax this interpreter cannot parse --------------------------------------------------------------

NEW_SYNTAX = """\
from jax._src.lib import jaxlib_extension_version

type Alias = int
label = f"{'a' + "b"}"
if jaxlib_extension_version >= 470:
    type Label = str  # newer syntax inside the gate's own statement: this Python cannot read the gate
"""


def _newer_syntax_tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "new_syntax.py").write_text(NEW_SYNTAX)
    return tmp_path


def test_newer_syntax_is_read_by_a_newer_python_or_listed_failed(tmp_path: Path) -> None:
    tree = _newer_syntax_tree(tmp_path)
    running = sys.version_info[:2]
    newer = [p for p in find_pythons().values() if tuple(map(int, p.version.split("."))) >= (3, 12)]
    found_gates, failed = gates.find_gates(tree, jax_profile())
    if running >= (3, 12) or newer:
        assert failed == {}
        assert [(g.file, g.line, g.kind, [str(c) for c in g.comparisons]) for g in found_gates] == [
            ("pkg/new_syntax.py", 5, "if", ["jaxlib_extension_version >= 470"])]
        if running < (3, 12):  # it was really the newer interpreter that read it
            assert gatefind.scan(str(tree), ["pkg/new_syntax.py"], NAMES, RAW)[1]
    else:
        assert found_gates == []
        assert re.fullmatch(r"line [36]: .+ \(Python 3\.\d+\)", failed["pkg/new_syntax.py"])


def test_newer_syntax_without_a_newer_python_is_listed_failed(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.version_info[:2] >= (3, 12):
        pytest.skip("this interpreter parses Python 3.12 syntax itself")
    monkeypatch.setattr(gates, "find_pythons", lambda: {})
    found_gates, failed = gates.find_gates(_newer_syntax_tree(tmp_path), jax_profile())
    assert found_gates == []
    python = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    assert list(failed) == ["pkg/new_syntax.py"]
    assert re.match(r"line [36]: ", failed["pkg/new_syntax.py"]) and failed["pkg/new_syntax.py"].endswith(f"({python})")


def test_syntax_no_python_parses_stays_failed_with_the_newest_pythons_reason(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("if jaxlib_extension_version >= 470 :::\n    pass\n")
    (tmp_path / "fine.py").write_text("from jax._src.lib import jaxlib_extension_version as v\nok = v >= 470\n")
    found_gates, failed = gates.find_gates(tmp_path, jax_profile())
    assert [(g.file, g.line) for g in found_gates] == [("fine.py", 2)]
    newest = list(find_pythons())[-1] if find_pythons() else f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert failed == {"broken.py": failed["broken.py"]}
    assert failed["broken.py"].startswith("line 1: ") and failed["broken.py"].endswith(f"(Python {newest})")


# -- three-valued logic ----------------------------------------------------------------------------------

HOLDS, FAILS = Comparison(J, ">=", 100, 1, 0), Comparison(J, ">=", 900, 1, 0)
VALUES = {J: 500}
LEAF = {True: {"cmp": [0]}, False: {"cmp": [1]}, None: {"other": "flag"}}
AND = {(True, True): True, (True, False): False, (True, None): None, (False, True): False, (False, False): False,
       (False, None): False, (None, True): None, (None, False): False, (None, None): None}
OR = {(True, True): True, (True, False): True, (True, None): True, (False, True): True, (False, False): False,
      (False, None): None, (None, True): True, (None, False): None, (None, None): None}


@pytest.mark.parametrize(("pair", "expected"), AND.items())
def test_evaluate_and(pair: tuple[bool | None, bool | None], expected: bool | None) -> None:
    condition = {"and": [LEAF[pair[0]], LEAF[pair[1]]]}
    assert evaluate(condition, (HOLDS, FAILS), VALUES) is expected


@pytest.mark.parametrize(("pair", "expected"), OR.items())
def test_evaluate_or(pair: tuple[bool | None, bool | None], expected: bool | None) -> None:
    condition = {"or": [LEAF[pair[0]], LEAF[pair[1]]]}
    assert evaluate(condition, (HOLDS, FAILS), VALUES) is expected


@pytest.mark.parametrize(("value", "expected"), [(True, False), (False, True), (None, None)])
def test_evaluate_not(value: bool | None, expected: bool | None) -> None:
    assert evaluate({"not": LEAF[value]}, (HOLDS, FAILS), VALUES) is expected


@pytest.mark.parametrize(("api", "expected"), [(470, True), (469, None), (None, None)])
def test_evaluate_other_or_comparison(api: int | None, expected: bool | None) -> None:
    condition = {"or": [{"other": "x"}, {"cmp": [0]}]}
    assert evaluate(condition, (Comparison(J, ">=", 470, 1, 0),), {J: api}) is expected


def test_evaluate_conjunction_of_comparisons_and_unknown_numbers() -> None:
    chained = (Comparison(J, ">=", 300, 1, 0), Comparison(J, "<", 600, 1, 0), Comparison(IFRT, ">=", 1, 1, 0))
    assert evaluate(C01, chained, {J: 452}) is True
    assert evaluate(C01, chained, {J: 600}) is False
    assert evaluate(C01, chained, {}) is None  # number missing: unknown
    assert evaluate({"cmp": [0, 2]}, chained, {J: 452, IFRT: None}) is None
    assert evaluate({"cmp": [1, 2]}, chained, {J: 700, IFRT: None}) is False  # a false part decides
    assert evaluate({"other": "x"}, chained, {J: 452}) is None


@pytest.mark.parametrize(("op", "threshold", "holds_at_500", "boundary"), [
    (">=", 500, True, 500), (">", 500, False, 501), ("<", 500, False, 500), ("<=", 500, True, 501),
    ("==", 500, True, 500), ("!=", 500, False, 500),
])
def test_comparison_holds_and_boundary(op: str, threshold: int, holds_at_500: bool, boundary: int) -> None:
    comparison = Comparison(J, op, threshold, 1, 0)
    assert comparison.holds(500) is holds_at_500 and comparison.boundary == boundary
    assert str(comparison) == f"{J} {op} {threshold}"


# -- releases and the judge ------------------------------------------------------------------------------

SYNTHETIC = Releases({"1.0": {J: 100, IFRT: None}, "1.1": {J: 110, IFRT: None}, "1.2": {J: 120, IFRT: None},
                      "1.10": {J: 130, IFRT: None}}, Version("1.1"))


def test_releases_order_by_version_and_respect_the_minimum() -> None:
    assert SYNTHETIC.ordered == ["1.0", "1.1", "1.2", "1.10"]
    assert SYNTHETIC.supported == ["1.1", "1.2", "1.10"]
    assert Releases(SYNTHETIC.numbers, Version("1.2")).supported == ["1.2", "1.10"]
    assert Releases(SYNTHETIC.numbers, Version("2.0")).supported == []
    assert SYNTHETIC.newest(J) == 130 and SYNTHETIC.newest(IFRT) is None
    assert SYNTHETIC.first_at_least(J, 111) == "1.2" and SYNTHETIC.first_at_least(J, 131) is None


def test_real_releases_supported_from_the_minimum() -> None:
    expected = sorted((v for v in JAXLIB if Version(v) >= Version("0.10.1")), key=Version)
    assert releases().supported == expected
    assert expected[0] == "0.10.1" and expected[-1] == "0.12.0.1"
    assert releases("0.9.0").supported[:5] == ["0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0"]
    assert all(row[IFRT] is None for row in releases().numbers.values())  # ifrt_version: not in the wheels' data


@pytest.mark.parametrize(("op", "threshold", "verdict"), [
    (">=", 110, "always-true"), (">=", 111, "live"), (">=", 130, "live"), (">=", 131, "ahead"), (">=", 500, "ahead"),
    (">", 109, "always-true"), (">", 110, "live"), (">", 129, "live"), (">", 130, "ahead"),
    ("<", 110, "always-false"), ("<", 111, "live"), ("<", 130, "live"), ("<", 131, "ahead"),
    ("<=", 109, "always-false"), ("<=", 110, "live"), ("<=", 129, "live"), ("<=", 130, "ahead"),
    ("==", 100, "always-false"), ("==", 120, "live"), ("==", 131, "ahead"),
    ("!=", 100, "always-true"), ("!=", 120, "live"), ("!=", 131, "ahead"),
])
def test_verdict_and_ahead_only_above_the_newest_release(op: str, threshold: int, verdict: str) -> None:
    judgement = judge(make_gate((J, op, threshold)), SYNTHETIC)
    assert judgement.verdict == verdict
    assert (verdict == "ahead") == (upper_side(op, threshold) > 130)
    assert judgement.comparisons == {f"{J} {op} {threshold}": verdict}


def test_minimum_decides_what_is_live() -> None:
    gate = make_gate((J, "==", 100))  # only release 1.0 has 100
    assert judge(gate, SYNTHETIC).verdict == "always-false"
    assert judge(gate, Releases(SYNTHETIC.numbers, Version("1.0"))).verdict == "live"


def test_the_frontends_version_caps_the_supported_releases() -> None:
    capped = Releases(SYNTHETIC.numbers, Version("1.1"), Version("1.2"))
    assert capped.supported == ["1.1", "1.2"] and capped.newest(J) == 120
    assert Releases(SYNTHETIC.numbers, Version("1.1"), Version("1.2.dev0")).supported == ["1.1", "1.2"]
    assert Releases(SYNTHETIC.numbers, Version("1.1"), Version("1.1.5")).supported == ["1.1"]
    gate = make_gate((J, ">=", 121))  # 1.10 has it, but the frontend does not support 1.10
    assert judge(gate, SYNTHETIC).verdict == "live"
    capped_judgement = judge(gate, capped)
    assert capped_judgement.verdict == "ahead" and capped_judgement.first_releases == {f"{J} >= 121": "1.10"}


def test_judgement_sides_reason_and_first_release() -> None:
    judgement = judge(make_gate((J, ">=", 111)), SYNTHETIC)
    assert judgement.sides == {"true": ["1.2", "1.10"], "false": ["1.1"]}
    assert judgement.reason == "true on 2, false on 1 of the releases 1.1..1.10"
    assert judgement.first_releases == {f"{J} >= 111": "1.2"}
    ahead = judge(make_gate((J, ">=", 131)), SYNTHETIC)
    assert ahead.reason == "false on every release 1.1..1.10; the other side needs a backend built at HEAD"
    assert ahead.first_releases == {f"{J} >= 131": None}
    unknown = judge(make_gate((IFRT, ">=", 1)), SYNTHETIC)
    assert unknown.verdict == "unknown" and unknown.first_releases == {f"{IFRT} >= 1": "unknown"}
    assert "ifrt_version is not known for every release 1.1..1.10" in unknown.reason


def test_judge_verdicts_and_first_releases_of_the_tree(found: tuple[list[Gate], dict[str, str]]) -> None:
    judgements = gates.judge_all(found[0], releases())
    assert [(j.gate.file, j.gate.line, j.verdict) for j in judgements] == [(r.file, r.line, r.verdict)
                                                                            for r in EXPECTED]
    for judgement, row in zip(judgements, EXPECTED, strict=True):
        expected = {f"{number} {op} {threshold}": first_release(upper_side(op, threshold)) if number == J
                    else "unknown" for number, op, threshold in row.comparisons}
        assert judgement.first_releases == expected, (row.file, row.line)


def test_first_releases_spot_checks(found: tuple[list[Gate], dict[str, str]]) -> None:
    by_place = {(j.gate.file, j.gate.line): j for j in gates.judge_all(found[0], releases())}
    assert by_place[(OPS, 6)].first_releases == {f"{J} >= 300": "0.4.38"}  # 0.4.36 has 299, 0.4.38 has 301
    assert by_place[(OPS, 10)].first_releases == {f"{J} > 470": "0.11.0"}
    assert by_place[(LOGIC, 17)].first_releases == {f"{J} >= 460": "0.10.2", f"{J} < 500": "0.12.0"}
    assert by_place[(PLACES, 20)].first_releases == {f"{J} > 505": first_release(506)}  # None in jax.json now
    live = by_place[(OPS, 10)]
    assert live.sides == {"true": ["0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.12.0.1"], "false": ["0.10.1", "0.10.2"]}
    assert by_place[(UNKNOWN, 20)].reason == "depends on code other than API numbers"
    assert by_place[(UNKNOWN, 14)].reason.startswith("ifrt_version is not known for every release 0.10.1..0.12.0.1")
    assert by_place[(UNKNOWN, 20)].comparisons == {f"{J} >= 300": "always-true"}  # the comparison alone is decided


def test_judge_with_a_higher_minimum(found: tuple[list[Gate], dict[str, str]]) -> None:
    judgements = gates.judge_all(found[0], releases("0.12.0"))
    assert [j.verdict for j in judgements] == [r.verdict_012 for r in EXPECTED]


# -- the report and the declared minimum -----------------------------------------------------------------


def test_declared_minimum_from_the_tree_and_from_the_package_directory() -> None:
    family = jax_profile()
    version_file = TREE / "jax" / "version.py"
    assert gatereport.declared_minimum(TREE, family) == ("0.10.1", TREE_VERSION, version_file)
    assert gatereport.declared_minimum(TREE / "jax", family) == ("0.10.1", TREE_VERSION, version_file)
    with pytest.raises(gatereport.MinimumNotFound, match="--min-backend"):
        gatereport.declared_minimum(TREE / "checks", family)


def test_declared_minimum_from_the_package_directory_as_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TREE / "jax")
    assert gatereport.declared_minimum(Path("."), jax_profile())[0] == "0.10.1"


def test_counts_list_every_verdict(found: tuple[list[Gate], dict[str, str]]) -> None:
    counts = gatereport.counts(gates.judge_all(found[0], releases()))
    assert list(counts) == list(gates.VERDICTS)
    assert counts == {v: sum(r.verdict == v for r in EXPECTED) for v in gates.VERDICTS}
    assert gatereport.counts([]) == dict.fromkeys(gates.VERDICTS, 0)


def test_markdown_gives_each_gate_one_table_row(found: tuple[list[Gate], dict[str, str]]) -> None:
    report = gatereport.markdown(gates.judge_all(found[0], releases()), "header")
    for row in EXPECTED:
        (line,) = [text for text in report.splitlines() if text.startswith(f"| `{row.file}:{row.line}` |")]
        assert line.endswith(" |") and f"| {row.verdict} |" in line, line


# -- the CLI -------------------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_counts_match_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gates", str(TREE), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["counts"] == {"always-true": 8, "always-false": 5, "live": 13, "ahead": 9, "unknown": 5}
    assert report["counts"] == {v: sum(r.verdict == v for r in EXPECTED) for v in gates.VERDICTS}
    assert list(report["counts"]) == list(gates.VERDICTS)
    assert report["minimum_backend"] == "0.10.1" and report["minimum_source"] == str(TREE / "jax" / "version.py")
    assert report["unparsed"] == {}
    assert [(g["file"], g["line"], g["verdict"]) for g in report["gates"]] == [(r.file, r.line, r.verdict)
                                                                               for r in EXPECTED]


def test_cli_min_backend_overrides_the_declared_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gates", str(TREE), "--json", "--min-backend", "0.12.0")
    assert code == 0
    report = json.loads(out)
    assert (report["minimum_backend"], report["minimum_source"]) == ("0.12.0", "--min-backend")
    assert [g["verdict"] for g in report["gates"]] == [r.verdict_012 for r in EXPECTED]
    assert report["counts"] == {v: sum(r.verdict_012 == v for r in EXPECTED) for v in gates.VERDICTS}


def test_cli_on_the_package_directory_uses_the_version_file_beside_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gates", str(TREE / "jax"), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["minimum_source"] == str(TREE / "jax" / "version.py")
    inside = [r for r in EXPECTED if r.file.startswith("jax/")]
    assert [(g["file"], g["line"]) for g in report["gates"]] == [(r.file.removeprefix("jax/"), r.line) for r in inside]
    assert report["counts"] == {v: sum(r.verdict == v for r in inside) for v in gates.VERDICTS}


def test_cli_markdown_has_a_row_per_gate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gates", str(TREE), "--markdown")
    assert code == 0
    above_505, above_600 = first_release(506) or "no release yet", first_release(600) or "no release yet"
    assert (f"| `{PLACES}:20` | ternary | `jaxlib_extension_version > 505` | ahead | "
            f"jaxlib_extension_version > 505: {above_505} |") in out.splitlines()
    assert f"| `{LOGIC}:15` | if | `300 <= v < 600` | ahead | {J} >= 300: 0.4.38; {J} < 600: {above_600} |" in out
    assert f"| live | {sum(r.verdict == 'live' for r in EXPECTED)} |" in out.splitlines()


def test_cli_text_lists_gates_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gates", str(TREE))
    assert code == 0
    assert re.search(rf"  {re.escape(OPS)}:24: live +if +477 == jaxlib_extension_version\n", out)
    assert out.rstrip().splitlines()[-1].startswith(f"{len(EXPECTED)} gates: ")


def test_cli_without_a_version_file_needs_min_backend(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from jax._src.lib import jaxlib_extension_version as v\nok = v >= 470\n")
    code, out, err = run(capsys, "gates", str(tmp_path))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("jaxrel gates: error: ") and "--min-backend" in line
    code, out, _ = run(capsys, "gates", str(tmp_path), "--json", "--min-backend", "0.10.1")
    assert code == 0 and json.loads(out)["counts"]["live"] == 1


def test_cli_caps_the_supported_releases_at_the_trees_version(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "version.py").write_text('_version = "0.11.0"\n_minimum_jaxlib_version = "0.10.1"\n')
    (tmp_path / "jax" / "m.py").write_text("from jax._src.lib import jaxlib_extension_version as v\n"
                                           "a = v >= 470\nb = v >= 480\n")
    assert JAXLIB["0.11.0"][J] == 477 and JAXLIB["0.11.1"][J] == 480
    code, out, _ = run(capsys, "gates", str(tmp_path), "--json")
    assert code == 0
    report = json.loads(out)
    assert [(g["line"], g["verdict"]) for g in report["gates"]] == [(2, "live"), (3, "ahead")]
    assert report["gates"][0]["sides"] == {"true": ["0.11.0"], "false": ["0.10.1", "0.10.2"]}
    code, out, _ = run(capsys, "gates", str(tmp_path))
    assert code == 0 and "supported releases 0.10.1..0.11.0" in out.splitlines()[0]


@pytest.mark.parametrize("which", ["file", "missing"])
def test_cli_refuses_a_non_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path, which: str) -> None:
    target = tmp_path / "m.py"
    if which == "file":
        target.write_text("x = 1\n")
    code, out, err = run(capsys, "gates", str(target), "--min-backend", "0.10.1")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("jaxrel gates: error: ") and "is not a directory" in line


def test_cli_refuses_a_minimum_above_every_release(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "gates", str(TREE), "--min-backend", "99.0")
    assert code == 2 and err.startswith("jaxrel gates: error: no known jaxlib release between 99.0 and ")
