"""`jaxrel gates --fix` never breaks the tree it fixes (issue #14).

Imports are removed only when every read of them was removed, they are not in ``__all__``, carry no
``noqa: F401`` and no other module of the tree imports them; the rewritten tree is verified (a file
whose rewrite fails is left as it was, and listed); gates outside a branch lose only their decided
leading part; a tree is written all or none.

As in test_gatefix.py, every tree declares jax 0.10.2 with minimum jaxlib 0.10.1: for
``v = jaxlib_extension_version``, ``v >= 450`` is always true and ``v < 450`` always false.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from jaxrel.cli import main
from jaxrel.errors import EnvironmentFailure
from jaxrel.family import jax_profile
from jaxrel.gates import fix as gatefix
from jaxrel.gates.fix import TreeFix, fix_tree
from jaxrel.gates.judge import Releases, find_gates, judge_all

VERSION_PY = '_version = "0.10.2"\n_minimum_jaxlib_version = "0.10.1"\n'


def _src(text: str) -> str:
    return textwrap.dedent(text).removeprefix("\n")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in {"jax/version.py": VERSION_PY, "jax/__init__.py": "", "jax/_src/__init__.py": "",
                           **files}.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def _fix(root: Path) -> TreeFix:
    family = jax_profile()
    found, failed = find_gates(root, family)
    assert failed == {}
    return fix_tree(root, judge_all(found, Releases.from_family(family, Version("0.10.1"), Version("0.10.2"))))


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


# -- 1. imports: a re-export, a store, __all__, noqa, other modules -------------------------------------


LIB = _src("""
    from typing import TYPE_CHECKING

    from jaxlib import _jax
    from jaxlib.xla_client import _version as jaxlib_extension_version

    if jaxlib_extension_version >= 450 or TYPE_CHECKING:
      from jaxlib import _hlo as hlo  # noqa: F401
    else:
      hlo = _jax
""")


def test_the_issue_re_export_survives(tmp_path: Path) -> None:
    """The tree of the issue: the kept body's import is a re-export that another module imports."""
    tree = _tree(tmp_path, {"jax/_src/lib/__init__.py": LIB,
                            "jax/_src/stages.py": "from jax._src.lib import hlo, _jax\n\nx = hlo.Op(_jax)\n"})
    fixed = _fix(tree)
    assert fixed.failed == {}
    assert fixed.changed["jax/_src/lib/__init__.py"] == "\n" + _src("""
        from jaxlib import _jax

        from jaxlib import _hlo as hlo  # noqa: F401
    """)
    assert fixed.files["jax/_src/lib/__init__.py"][1].changed == [
        "6: if always true: kept its body", "_jax: import kept (imported from here by jax/_src/stages.py), though "
        "no longer used here", "import TYPE_CHECKING: no longer used, removed",
        "import jaxlib_extension_version: no longer used, removed"]


def test_a_name_only_stored_in_the_removed_branch_keeps_its_import(tmp_path: Path) -> None:
    """``hlo = _jax`` stores; it never read ``hlo``: the import was never "used", so it is no "unused" import."""
    source = _src("""
        from jaxlib import _jax, _hlo as hlo

        if jaxlib_extension_version >= 450:
            pass
        else:
            hlo = _jax
    """)
    tree = _tree(tmp_path, {"jax/_src/m.py": "from jax._src.lib import jaxlib_extension_version\n" + source})
    fixed = _fix(tree)
    assert "_hlo as hlo" in fixed.changed["jax/_src/m.py"]
    assert "hlo = _jax" not in fixed.changed["jax/_src/m.py"]


@pytest.mark.parametrize(("import_line", "kept_because"), [
    ("from foo import helper  # noqa: F401", "its import says noqa: F401"),
    ("from foo import helper  # noqa", "its import says noqa: F401"),
    ("from foo import helper\n__all__ = [\n    'other',\n    'helper',\n]", "listed in __all__"),
    ("from foo import helper", None),
], ids=["noqa-F401", "bare-noqa", "__all__", "nothing"])
def test_an_import_read_only_in_removed_code(tmp_path: Path, import_line: str, kept_because: str | None) -> None:
    source = "from jax._src.lib import jaxlib_extension_version as v\n" + import_line + "\n" + _src("""
        if v < 450:
            helper()
    """)
    tree = _tree(tmp_path, {"jax/_src/m.py": source})
    fixed = _fix(tree)
    notes = fixed.files["jax/_src/m.py"][1].changed
    if kept_because is None:
        assert "helper" not in fixed.changed["jax/_src/m.py"]
        assert "import helper: no longer used, removed" in notes
    else:
        assert "from foo import helper" in fixed.changed["jax/_src/m.py"]
        assert f"helper: import kept ({kept_because}), though no longer used here" in notes


@pytest.mark.parametrize("importer", [
    "from jax._src.m import helper\n",
    "from jax._src import m\nm.helper()\n",
    "import jax._src.m as mm\nmm.helper()\n",
    "import jax._src.m\njax._src.m.helper()\n",
    "from . import m\nm.helper()\n",
    "from .m import *\n",
], ids=["from-import", "from-package", "import-as", "import-dotted", "relative", "star"])
def test_an_import_another_module_imports_is_kept(tmp_path: Path, importer: str) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        from foo import helper

        if v < 450:
            helper()
    """)
    tree = _tree(tmp_path, {"jax/_src/m.py": source, "jax/_src/user.py": importer})
    fixed = _fix(tree)
    assert "from foo import helper\n" in fixed.changed["jax/_src/m.py"]
    assert "helper: import kept (imported from here by jax/_src/user.py), though no longer used here" in \
        fixed.files["jax/_src/m.py"][1].changed


def test_a_module_that_does_not_import_the_name_does_not_keep_it(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        from foo import helper

        if v < 450:
            helper()
    """)
    other = "from jax._src.other import helper\nfrom jax._src import m\nm.something_else()\n"
    tree = _tree(tmp_path, {"jax/_src/m.py": source, "jax/_src/user.py": other})
    assert "helper" not in _fix(tree).changed["jax/_src/m.py"]


# -- 1b. verification: a rewrite that would break another module is not made -----------------------------------


def test_a_rewrite_dropping_a_name_another_module_imports_is_left_unchanged(tmp_path: Path) -> None:
    module = _src("""
        from jax._src.lib import jaxlib_extension_version as v

        if v < 450:
            legacy_api = 1
        if v >= 450:
            new_api = 2
    """)
    tree = _tree(tmp_path, {"jax/_src/m.py": module, "jax/_src/user.py": "from jax._src.m import legacy_api\n",
                            "jax/_src/fine.py": "from jax._src.lib import jaxlib_extension_version as v\n"
                                                "y = 1 if v >= 450 else 0\n"})
    fixed = _fix(tree)
    assert fixed.failed == {"jax/_src/m.py": "the rewrite no longer binds legacy_api (imported by jax/_src/user.py)"}
    assert list(fixed.changed) == ["jax/_src/fine.py"], "the other files are still fixed"
    assert "m.py" not in fixed.diff()


def test_a_rewrite_that_does_not_compile_is_left_unchanged(tmp_path: Path) -> None:
    """`yield` outside a function parses (libcst, ast) but does not compile: the rewrite is not written."""
    module = "from jax._src.lib import jaxlib_extension_version as v\nif v >= 450:\n    x = 1\nyield x\n"
    tree = _tree(tmp_path, {"jax/_src/m.py": module})
    before = _snapshot(tree)
    fixed = _fix(tree)
    assert list(fixed.failed) == ["jax/_src/m.py"]
    assert "does not compile after the rewrite: line 2: 'yield' outside function" in fixed.failed["jax/_src/m.py"]
    fixed.write()
    assert _snapshot(tree) == before


def test_cli_lists_files_left_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = "from jax._src.lib import jaxlib_extension_version as v\nif v < 450:\n    legacy_api = 1\n"
    tree = _tree(tmp_path, {"jax/_src/m.py": module, "jax/_src/user.py": "from jax._src.m import legacy_api\n"})
    before = _snapshot(tree)
    assert main(["gates", str(tree), "--fix"]) == 0
    err = capsys.readouterr().err
    assert "jax/_src/m.py: left unchanged: the rewrite no longer binds legacy_api" in err
    assert err.splitlines()[-1] == ("jaxrel gates: rewrote 0 files; 0 decided gates refused; "
                                    "1 files left unchanged (verification failed)")
    assert _snapshot(tree) == before


# -- 3. gates outside a branch: the decided leading part goes ---------------------------------------------------


def test_partial_simplification_outside_a_branch(tmp_path: Path) -> None:
    module = _src("""
        from jax._src.lib import jaxlib_extension_version as v


        def f(xs, reverse, inp):
            use_scan = v >= 460 and not reverse and isinstance(inp, int)
            fast = v >= 450 and not reverse and isinstance(inp, int)
            g(v < 450 or reverse)
            ys = [x for x in xs if v >= 450 and x]
            return not (v < 450) and reverse
    """)
    tree = _tree(tmp_path, {"jax/_src/m.py": module})
    fixed = _fix(tree)
    assert fixed.changed["jax/_src/m.py"] == _src("""
        from jax._src.lib import jaxlib_extension_version as v


        def f(xs, reverse, inp):
            use_scan = v >= 460 and not reverse and isinstance(inp, int)
            fast = not reverse and isinstance(inp, int)
            g(reverse)
            ys = [x for x in xs if x]
            return reverse
    """)
    notes = fixed.files["jax/_src/m.py"][1].changed
    assert "6: expression simplified to not reverse and isinstance(inp, int)" in notes
    assert "7: expression simplified to reverse" in notes


def test_a_decided_part_to_the_right_outside_a_branch_is_refused(tmp_path: Path) -> None:
    """``flag and True`` is ``flag`` only as a truth value; as a value it may be ``[]``, ``0``, ``None``."""
    module = "from jax._src.lib import jaxlib_extension_version as v\ny = flag and v >= 450\n"
    tree = _tree(tmp_path, {"jax/_src/m.py": module})
    fixed = _fix(tree)
    assert fixed.changed == {}
    assert fixed.files["jax/_src/m.py"][1].refused == [
        "2: flag and v >= 450: a decided comparison to the right of and/or outside a branch (the value would "
        "change); replace it by hand"]


def test_an_expression_inside_a_long_statement_is_rewritten_alone(tmp_path: Path) -> None:
    """A ternary deep inside a 60-line literal: only the ternary goes through libcst; the rest is kept byte for byte."""
    rows = "".join(f"    ({i}, 'r{i}'),  # row {i}\n" for i in range(60))
    module = ("from jax._src.lib import jaxlib_extension_version as v\nTABLE = [\n" + rows +
              "    (1 if v >= 450 else 0,\n     'gated'),\n" + rows + "]\n")
    tree = _tree(tmp_path, {"jax/_src/m.py": module})
    fixed = _fix(tree)
    assert fixed.changed["jax/_src/m.py"] == module.replace("(1 if v >= 450 else 0,", "(1,").replace(
        "from jax._src.lib import jaxlib_extension_version as v\n", "")


# -- 4. all or nothing -----------------------------------------------------------------------------------------


def _two_file_tree(tmp_path: Path) -> Path:
    module = "from jax._src.lib import jaxlib_extension_version as v\nif v >= 450:\n    x = 1\n"
    return _tree(tmp_path / "tree", {"jax/_src/a.py": module, "jax/_src/b.py": module})


def _immutable(path: Path) -> bool:
    chattr = shutil.which("chattr")
    return bool(chattr) and subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode == 0


def test_an_immutable_file_leaves_the_whole_tree_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _two_file_tree(tmp_path)
    before = _snapshot(tree)
    locked = tree / "jax/_src/b.py"
    if not _immutable(locked):
        pytest.skip("chattr +i does not work here (see the monkeypatched test below)")
    try:
        assert main(["gates", str(tree), "--fix"]) == 3
        err = capsys.readouterr().err
        assert "cannot write 1 of 2 files (jax/_src/b.py: Operation not permitted); nothing was changed" in err
        assert _snapshot(tree) == before
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)


def test_an_unwritable_file_is_found_before_anything_is_written(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _two_file_tree(tmp_path)
    before = _snapshot(tree)
    real_open = os.open

    def refusing(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if str(path).endswith("b.py") and flags & os.O_WRONLY:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)
    fixed = _fix(tree)
    with pytest.raises(EnvironmentFailure) as raised:
        fixed.write()
    assert raised.value.exit_code == 3
    assert str(raised.value) == "cannot write 1 of 2 files (jax/_src/b.py: Permission denied); nothing was changed"
    assert _snapshot(tree) == before


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()],
                         ids=["disk-full", "ctrl-c"])
def test_a_failure_between_renames_puts_every_file_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        failure: BaseException) -> None:
    tree = _two_file_tree(tmp_path)
    before = _snapshot(tree)
    fixed = _fix(tree)
    real_replace = os.replace
    done: list[str] = []

    def second_fails(source: str, target: str | os.PathLike[str]) -> None:
        if done and str(target).endswith(".py") and ".orig." not in str(source):
            raise failure
        real_replace(source, target)
        done.append(str(target))

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(EnvironmentFailure if isinstance(failure, OSError) else KeyboardInterrupt):
        fixed.write()
    monkeypatch.undo()
    assert done, "the first file had been replaced"
    assert _snapshot(tree) == before
    fixed.write()  # a rerun finishes the job
    assert _snapshot(tree) != before and _fix(tree).changed == {}


def test_fix_tree_reports_progress(tmp_path: Path) -> None:
    tree = _two_file_tree(tmp_path)
    family = jax_profile()
    found, _ = find_gates(tree, family)
    seen: list[tuple[int, int, str]] = []
    gatefix.fix_tree(tree, judge_all(found, Releases.from_family(family, Version("0.10.1"), Version("0.10.2"))),
                     progress=lambda n, total, file: seen.append((n, total, file)))
    assert seen == [(1, 2, "jax/_src/a.py"), (2, 2, "jax/_src/b.py")]
