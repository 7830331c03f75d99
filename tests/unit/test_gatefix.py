"""`jaxrel gates --fix/--diff`: decided gates rewritten to the code that remains, exactly; the rest untouched.

Every tree here declares jax 0.10.2 with minimum jaxlib 0.10.1, so the supported releases are 0.10.1
(jaxlib_extension_version 452) and 0.10.2 (467), and for ``v = jaxlib_extension_version``:

- ``v >= 450`` is always true and ``v < 450`` always false (on both releases and at HEAD);
- ``v >= 460`` is live (false on 0.10.1, true on 0.10.2);
- ``v >= 500`` is ahead (false on every release, true only for a jaxlib built at HEAD);
- ``ifrt_version`` is not readable from the wheels: unknown.
"""

from __future__ import annotations

import ast
import os
import stat
import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from jaxrel.cli import main
from jaxrel.family import jax_profile
from jaxrel.gates.fix import FileFix, fix_source, write_atomically
from jaxrel.gates.judge import Judgement, Releases, find_gates, judge_all

MINIMUM, VERSION = "0.10.1", "0.10.2"
VERSION_PY = f'_version = "{VERSION}"\n_minimum_jaxlib_version = "{MINIMUM}"\n'
MODULE = "jax/_src/m.py"


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A jax source tree under ``root``: its version file plus ``files`` (relative path -> text)."""
    for relative, text in {"jax/version.py": VERSION_PY, **files}.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    return root


def _judge(tree: Path, relative: str = MODULE) -> list[Judgement]:
    family = jax_profile()
    found, failed = find_gates(tree, family)
    assert failed == {}
    releases = Releases.from_family(family, Version(MINIMUM), Version(VERSION))
    assert releases.supported == ["0.10.1", "0.10.2"]
    return judge_all([gate for gate in found if gate.file == relative], releases)


def _fix(tmp_path: Path, source: str) -> FileFix:
    """``source`` as a module of a tree, its gates found and judged, then rewritten."""
    tree = _tree(tmp_path / "tree", {MODULE: source})
    fix = fix_source(source, _judge(tree))
    _compiles(fix.source)
    return fix


def _compiles(source: str) -> None:
    ast.parse(source)
    compile(source, MODULE, "exec")


def _src(text: str) -> str:
    """A dedented triple-quoted block without the newline after its opening quotes."""
    return textwrap.dedent(text).removeprefix("\n")


# -- the judge's side: the thresholds mean what the tests assume ----------------------------------


def test_thresholds_give_the_intended_verdicts(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v, ifrt_version
        a = 1 if v >= 450 else 0
        b = 1 if v < 450 else 0
        c = 1 if v >= 460 else 0
        d = 1 if v >= 500 else 0
        e = 1 if ifrt_version >= 3 else 0
    """)
    judgements = _judge(_tree(tmp_path, {MODULE: source}))
    assert [(j.gate.line, j.verdict) for j in judgements] == [
        (2, "always-true"), (3, "always-false"), (4, "live"), (5, "ahead"), (6, "unknown")]


# -- 1. if / else --------------------------------------------------------------------------------------------


IF_ELSE = _src("""
    import os
    from jax._src.lib import jaxlib_extension_version


    def new_path():
        # chooses the new API
        if jaxlib_extension_version >= 450:
            # the new API
            return 1  # fast
        else:
            return 0


    def old_path():
        if jaxlib_extension_version < 450:
            return 0
        else:
            # the only path left
            return os.sep


    def gone():
        if jaxlib_extension_version < 450:
            legacy()


    def rest_kept():
        if jaxlib_extension_version < 450:
            legacy()
        return 2
""")

IF_ELSE_FIXED = _src("""
    import os


    def new_path():
        # chooses the new API
        # the new API
        return 1  # fast


    def old_path():
        # the only path left
        return os.sep


    def gone():
        pass


    def rest_kept():
        return 2
""")


def test_if_else_keeps_the_branch_that_remains(tmp_path: Path) -> None:
    fix = _fix(tmp_path, IF_ELSE)
    assert fix.source == IF_ELSE_FIXED
    assert fix.changed == ["7: if always true: kept its body", "15: if always false: kept its else",
                           "23: if always false: kept nothing", "28: if always false: kept nothing",
                           "import jaxlib_extension_version: no longer used, removed"]
    assert fix.refused == []


def test_if_on_one_line_and_nested_in_a_class(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v


        class C:
            if v >= 450: fast = True
            if v < 450: slow = True

            def method(self):
                for i in range(3):
                    if v >= 450:
                        if i:
                            continue
                    else:
                        break
                return i
    """)
    assert _fix(tmp_path, source).source == _src("""


        class C:
            fast = True

            def method(self):
                for i in range(3):
                    if i:
                        continue
                return i
    """)


def test_closing_comments_of_a_kept_block_survive(tmp_path: Path) -> None:
    """Comments after a kept block's last statement (libcst: the block's footer) move out with it."""
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v


        def f(x):
            if v >= 450:
                x = 1
                # end of the kept body
            else:
                x = 2
                # end of the dropped else
            return x


        def g(x):
            if v < 450:
                x = 1
            else:
                x = 2
                # end of the kept else
            return x


        def h():
            if v >= 450:
                if v >= 440:
                    y = 1
                    # inner end
                # outer end


        if v >= 450:
            z = 1
            # end of the module's last block
    """)
    assert _fix(tmp_path, source).source == _src("""


        def f(x):
            x = 1
            # end of the kept body
            return x


        def g(x):
            x = 2
            # end of the kept else
            return x


        def h():
            y = 1
            # inner end
            # outer end


        z = 1
        # end of the module's last block
    """)


# -- 2. if / elif / else chains ------------------------------------------------------------------------------


ELIF = _src("""
    from jax._src.lib import jaxlib_extension_version as v


    def a(x):
        if x:
            return 0
        elif v >= 450:
            return 1
        elif x is None:
            return 3
        else:
            return 2


    def b(x):
        if x:
            return 0
        elif v < 450:
            return 1
        elif x is None:
            return 3
        else:
            return 2


    def c(x):
        if v < 450:
            return 1
        elif x:  # first of the rest
            return 3
        else:
            return 2


    def d(x):
        if x:
            return 0
        elif v < 450:
            return 1
""")

ELIF_FIXED = _src("""


    def a(x):
        if x:
            return 0
        else:
            return 1


    def b(x):
        if x:
            return 0
        elif x is None:
            return 3
        else:
            return 2


    def c(x):
        if x:  # first of the rest
            return 3
        else:
            return 2


    def d(x):
        if x:
            return 0
""")


def test_elif_chains(tmp_path: Path) -> None:
    fix = _fix(tmp_path, ELIF)
    assert fix.source == ELIF_FIXED
    assert sorted(fix.changed) == sorted([
        "7: elif always true: became else", "18: elif always false: removed", "27: if always false: kept its else",
        "38: elif always false: removed", "import v: no longer used, removed"])


def test_a_literal_elif_false_that_is_no_gate_is_left_alone(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        q = 3
        if q == 3:
            pass
        elif False:
            unreachable = 1
        if v >= 450:
            z = 1
    """)
    assert _fix(tmp_path, source).source == _src("""
        q = 3
        if q == 3:
            pass
        elif False:
            unreachable = 1
        z = 1
    """)


# -- 3. ternaries ---------------------------------------------------------------------------------------------


def test_ternary_becomes_its_chosen_side(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        a = new() if v >= 450 else old()
        b = (new() if v < 450 else old())
        c = [new() if not v < 450 else old(), 1 if v >= 460 else 0]
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""
        from jax._src.lib import jaxlib_extension_version as v
        a = new()
        b = (old())
        c = [new(), 1 if v >= 460 else 0]
    """)
    assert fix.changed == ["2: ternary: kept its true side", "3: ternary: kept its false side",
                           "4: ternary: kept its true side"]


# -- 4. asserts -----------------------------------------------------------------------------------------------


def test_assert_that_always_holds_is_removed_one_that_always_fails_is_refused(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        assert v >= 450, "jaxlib too old"
        assert v < 450
        x = 1
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""
        from jax._src.lib import jaxlib_extension_version as v
        assert v < 450
        x = 1
    """)
    assert fix.changed == ["2: assert always holds: removed"]
    assert fix.refused == ["3: v < 450: an assert that always fails"]


# -- 5. skip decorators ----------------------------------------------------------------------------------------


SKIPS = _src("""
    import unittest

    import pytest

    from jax._src.lib import jaxlib_extension_version as v


    class T(unittest.TestCase):
        @unittest.skipIf(v < 450, "needs a newer jaxlib")
        def test_never_skipped(self):
            pass

        @unittest.skipIf(v >= 450, "old jaxlib only")
        def test_always_skipped(self):
            pass

        @unittest.skipUnless(v >= 450, "needs a newer jaxlib")
        @unittest.skipIf(v >= 460, "live")
        def test_unless_never_skipped(self):
            pass

        @unittest.skipUnless(v < 450, "old jaxlib only")
        def test_unless_always_skipped(self):
            pass


    @pytest.mark.skipif(v < 450, reason="needs a newer jaxlib")
    def test_pytest_never_skipped():
        pass
""")

SKIPS_FIXED = _src("""
    import unittest

    from jax._src.lib import jaxlib_extension_version as v


    class T(unittest.TestCase):
        def test_never_skipped(self):
            pass

        @unittest.skipIf(v >= 450, "old jaxlib only")
        def test_always_skipped(self):
            pass

        @unittest.skipIf(v >= 460, "live")
        def test_unless_never_skipped(self):
            pass

        @unittest.skipUnless(v < 450, "old jaxlib only")
        def test_unless_always_skipped(self):
            pass


    def test_pytest_never_skipped():
        pass
""")


def test_skip_decorators(tmp_path: Path) -> None:
    fix = _fix(tmp_path, SKIPS)
    assert fix.source == SKIPS_FIXED
    assert fix.changed == ["9: skip decorator never skips: removed", "17: skip decorator never skips: removed",
                           "27: skip decorator never skips: removed", "import pytest: no longer used, removed"]
    assert fix.refused == ["13: v >= 450: the test is always skipped; delete it by hand",
                           "22: v < 450: the test is always skipped; delete it by hand"]


# -- 6. partial conditions ----------------------------------------------------------------------------------


def test_a_decided_part_of_a_condition_is_simplified_away(tmp_path: Path) -> None:
    source = _src("""
        from typing import TYPE_CHECKING

        from jax._src.lib import jaxlib_extension_version as v

        flag = True
        if flag and v >= 450:
            x = 1
        if TYPE_CHECKING or v >= 450:
            y = 1
        if v < 450 or flag.enabled:
            z = 1
        if flag and v >= 460 and not v < 450:
            w = 1
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""

        from jax._src.lib import jaxlib_extension_version as v

        flag = True
        if flag:
            x = 1
        y = 1
        if flag.enabled:
            z = 1
        if flag and v >= 460:
            w = 1
    """)
    assert fix.changed == ["6: condition simplified to flag", "8: if always true: kept its body",
                           "10: condition simplified to flag.enabled", "12: condition simplified to flag and v >= 460",
                           "import TYPE_CHECKING: no longer used, removed"]


def test_a_decided_comparison_next_to_a_call_leaves_the_file_unchanged(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v

        if call() or v >= 450:
            x = 1
        if v >= 450:
            y = 1
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == source
    assert fix.changed == []
    assert fix.refused == ["a decided comparison sits next to code with side effects; the file was left unchanged"]


def test_code_outside_the_gates_is_never_simplified(tmp_path: Path) -> None:
    """`x or False` is not `x` (None stays None); `f() and False` outside a gate is no reason to refuse.

    The list comprehension is jax 0.12.0.1's jax/_src/array.py:1226, which a rewrite once turned into
    `seen.add(i)`: a list of None where False was meant.
    """
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v

        is_duplicate = [
            True if i in seen else (seen.add(i) or False) for i in indices]
        quiet = not True
        loud = check() and False
        if v >= 450:
            y = 1
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""

        is_duplicate = [
            True if i in seen else (seen.add(i) or False) for i in indices]
        quiet = not True
        loud = check() and False
        y = 1
    """)
    assert fix.refused == []


def test_parentheses_tight_against_a_keyword_are_kept(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v

        if(flag and v >= 450):
            a = 1
        assert(flag and not(v < 450))
        b = 1 if(flag and v >= 450)else 2
        if(v >= 450):
            c = 1
        while(v < 450):
            d = 1
    """)
    assert _fix(tmp_path, source).source == _src("""

        if(flag):
            a = 1
        assert(flag)
        b = 1 if(flag)else 2
        c = 1
    """)


def test_a_rewrite_that_would_need_reformatting_is_refused(tmp_path: Path) -> None:
    source = "from jax._src.lib import jaxlib_extension_version as v\nif(v >= 450)and flag:\n    a = 1\n"
    fix = _fix(tmp_path, source)
    assert fix.source == source
    assert fix.changed == []
    assert len(fix.refused) == 1
    assert fix.refused[0].startswith("cannot rewrite without reformatting")
    assert fix.refused[0].endswith("the file was left unchanged")


def test_while_that_never_runs_is_removed_and_one_forever_refused(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v

        while v < 450:
            spin()
        while v < 450:
            spin()
        else:
            done = 1
        while v >= 450:
            spin()
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""
        from jax._src.lib import jaxlib_extension_version as v
        done = 1
        while v >= 450:
            spin()
    """)
    assert fix.changed == ["3: while always false: kept nothing", "5: while always false: kept its else"]
    assert fix.refused == ["9: v >= 450: a loop whose condition is always true"]


# -- 7. imports -----------------------------------------------------------------------------------------------


def test_imports_that_became_unused_are_removed_the_others_kept(tmp_path: Path) -> None:
    source = _src("""
        import sys, os
        from foo import other, helper, third, fourth
        from jax._src.lib import jaxlib_extension_version, xla_extension_version as xv
        from jax._src import lib

        __all__ = ["other"]

        if jaxlib_extension_version < 450:
            helper(os.sep, third, fourth)
            other()
            sys.exit()
        if xv >= 460:
            third()
        if lib.jaxlib_extension_version >= 450:
            print(sys.argv)
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""
        import sys
        from foo import other, third
        from jax._src.lib import xla_extension_version as xv

        __all__ = ["other"]
        if xv >= 460:
            third()
        print(sys.argv)
    """)
    assert [c for c in fix.changed if c.startswith("import")] == [
        "import fourth: no longer used, removed", "import helper: no longer used, removed",
        "import jaxlib_extension_version: no longer used, removed",
        "import lib: no longer used, removed", "import os: no longer used, removed"]


def test_an_import_still_used_by_a_live_gate_is_kept(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version

        if jaxlib_extension_version >= 450:
            a = 1
        if jaxlib_extension_version >= 460:
            b = 1
    """)
    assert _fix(tmp_path, source).source == _src("""
        from jax._src.lib import jaxlib_extension_version

        a = 1
        if jaxlib_extension_version >= 460:
            b = 1
    """)


def test_an_import_in_a_function_used_only_in_a_dropped_branch_is_removed(tmp_path: Path) -> None:
    source = _src("""
        import jax.numpy as jnp
        from jax._src.lib import jaxlib_extension_version as v


        def f():
            import numpy as np
            if v < 450:
                return np.zeros(3)
            return jnp.ones(3)
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""
        import jax.numpy as jnp


        def f():
            return jnp.ones(3)
    """)
    assert fix.changed[-2:] == ["import np: no longer used, removed", "import v: no longer used, removed"]


# -- 8. gates never touched -----------------------------------------------------------------------------------


def test_live_ahead_and_unknown_gates_are_untouched(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        from jax._src.lib import ifrt_version

        if v >= 460:
            a = 1
        if v >= 500:
            b = 1
        else:
            b = 0
        if ifrt_version >= 3:
            c = 1
        d = 1 if flag and v >= 500 else 0
        assert v >= 460
    """)
    fix = _fix(tmp_path, source)
    assert fix == FileFix(source, [], [])


def test_a_decided_gate_outside_a_branch_is_refused(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v

        new = v >= 450
        old = call(v < 450)
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == source
    assert fix.refused == ["3: v >= 450: always-true outside a branch; replace it by hand",
                           "4: v < 450: always-false outside a branch; replace it by hand"]


def test_no_judgements_no_change() -> None:
    source = "if jaxlib_extension_version >= 450:\n    a = 1\n"
    assert fix_source(source, []) == FileFix(source, [], [])


# -- 9. column offsets: ast counts bytes, libcst characters -----------------------------------------------------


def test_non_ascii_text_before_a_gate(tmp_path: Path) -> None:
    source = _src("""
        from jax._src.lib import jaxlib_extension_version as v
        π = "héllo wörld ✓"


        def f():
            # ünïcödé
            s = "→→→"; t = "ü" if v >= 450 else "ø"
            if "ü" and "é" and v >= 450:
                return s
            return "ø" if v < 450 else "å"
    """)
    fix = _fix(tmp_path, source)
    assert fix.source == _src("""
        π = "héllo wörld ✓"


        def f():
            # ünïcödé
            s = "→→→"; t = "ü"
            if "ü" and "é":
                return s
            return "å"
    """)


def test_line_numbers_are_pythons_not_str_splitlines(tmp_path: Path) -> None:
    """A form feed or U+2028 ends a line for str.splitlines, not for Python: the gates after it still match."""
    source = ('from jax._src.lib import jaxlib_extension_version as v\n\x0c\ns = "a\u2028b"\n'
              "# éééé\nif v >= 450:\n    x = 1\n")
    fix = _fix(tmp_path, source)
    assert fix.source == '\x0c\ns = "a\u2028b"\n# éééé\nx = 1\n'
    assert fix.changed[0] == "5: if always true: kept its body"


def test_an_elif_after_a_form_feed_is_found_as_an_elif(tmp_path: Path) -> None:
    source = "x = 1\n\x0c\nif x:\n    pass\nelif jaxlib_extension_version >= 450:\n    pass\n"
    assert [(j.gate.line, j.gate.kind) for j in _judge(_tree(tmp_path, {MODULE: source}))] == [(5, "elif")]


# -- 10. whatever is rewritten still parses and compiles ---------------------------------------------------------


@pytest.mark.parametrize("source", [IF_ELSE, ELIF, SKIPS], ids=["if-else", "elif", "skips"])
def test_rewrites_parse_compile_and_are_idempotent(tmp_path: Path, source: str) -> None:
    first = _fix(tmp_path / "first", source)
    assert first.source != source
    again = _fix(tmp_path / "again", first.source)
    assert again.source == first.source
    assert again.changed == []


def test_crlf_source_keeps_crlf(tmp_path: Path) -> None:
    source = IF_ELSE.replace("\n", "\r\n")
    fix = _fix(tmp_path, source)
    assert fix.source == IF_ELSE_FIXED.replace("\n", "\r\n")


# -- 11. the command line -------------------------------------------------------------------------------------


CLI_MODULE = _src("""
    from jax._src.lib import jaxlib_extension_version


    def f():
        if jaxlib_extension_version >= 450:
            return 1
        return 2


    assert jaxlib_extension_version < 450
""")

CLI_FIXED = _src("""
    from jax._src.lib import jaxlib_extension_version


    def f():
        return 1
        return 2


    assert jaxlib_extension_version < 450
""")

CLI_DIFF = "".join(line + "\n" for line in [
    "--- a/jax/_src/a.py",
    "+++ b/jax/_src/a.py",
    "@@ -2,8 +2,7 @@",
    " ",
    " ",
    " def f():",
    "-    if jaxlib_extension_version >= 450:",
    "-        return 1",
    "+    return 1",
    "     return 2",
    " ",
    " ",
])


def _cli_tree(tmp_path: Path) -> Path:
    return _tree(tmp_path / "tree", {"jax/_src/a.py": CLI_MODULE, "jax/_src/b.py": "x = 1\n",
                                     "jax/_src/live.py": "from jax._src.lib import jaxlib_extension_version as v\n"
                                                         "y = 1 if v >= 460 else 0\n"})


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_cli_diff_prints_a_unified_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _cli_tree(tmp_path)
    before = _snapshot(tree)
    assert main(["gates", str(tree), "--diff"]) == 0
    out, err = capsys.readouterr()
    assert out == CLI_DIFF
    assert _snapshot(tree) == before
    assert err.splitlines() == ["jax/_src/a.py:5: if always true: kept its body",
                                "jax/_src/a.py:10: jaxlib_extension_version < 450: an assert that always fails "
                                "(refused)",
                                "jaxrel gates: would rewrite 1 files; 1 decided gates refused"]


def test_cli_fix_rewrites_in_place_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _cli_tree(tmp_path)
    before = _snapshot(tree)
    assert main(["gates", str(tree), "--fix"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "jaxrel gates: rewrote 1 files; 1 decided gates refused" in err
    assert "(refused)" in err
    after = _snapshot(tree)
    assert after == {**before, "jax/_src/a.py": CLI_FIXED.encode()}  # no temporary file left behind
    assert main(["gates", str(tree), "--fix"]) == 0
    _, err = capsys.readouterr()
    assert err.splitlines()[-1] == "jaxrel gates: rewrote 0 files; 1 decided gates refused"
    assert _snapshot(tree) == after


def test_cli_fix_keeps_crlf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _cli_tree(tmp_path)
    path = tree / "jax/_src/a.py"
    path.write_bytes(CLI_MODULE.replace("\n", "\r\n").encode())
    assert main(["gates", str(tree), "--fix"]) == 0
    capsys.readouterr()
    assert path.read_bytes() == CLI_FIXED.replace("\n", "\r\n").encode()


# -- 12. write_atomically ----------------------------------------------------------------------------------------


def test_write_atomically_keeps_mode_and_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "script.py"
    path.write_text("old\n")
    os.chmod(path, 0o751)
    write_atomically(path, "a = 1\r\nb = 'é'\r\n")
    assert path.read_bytes() == "a = 1\r\nb = 'é'\r\n".encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["script.py"]


def test_write_atomically_leaves_the_file_and_no_temporary_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "bad \udc80 surrogate\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]
