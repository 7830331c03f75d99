"""The one table renderer, the one Markdown table and the one output tail (jaxrel._util.text)."""

from __future__ import annotations

from jaxrel._util.text import markdown_table, table, tail


def test_table_pads_columns_rules_the_header_and_drops_trailing_spaces() -> None:
    assert table(("name", "v"), [("jax", "0.10.2"), ("jaxlib", "")]).splitlines() == [
        "name    v",
        "------  ------",
        "jax     0.10.2",
        "jaxlib",
    ]


def test_table_without_rule_or_header_and_with_an_indent() -> None:
    assert table(("a", "b"), [("x", 1)], rule=False) == "a  b\nx  1"
    assert table(None, [("ok  ", "versions", "all 1.0"), ("FAIL", "git", "dirty")], indent="  ") == (
        "  ok    versions  all 1.0\n  FAIL  git       dirty")
    assert table(None, []) == ""
    assert table(("only", "header"), []) == "only  header\n----  ------"


def test_markdown_table_escapes_pipes() -> None:
    assert markdown_table(("test", "`cell`"), [("`t[a|b]`", "✓"), ("u", 3)]).splitlines() == [
        "| test | `cell` |",
        "|---|---|",
        "| `t[a\\|b]` | ✓ |",
        "| u | 3 |",
    ]


def test_tail_keeps_the_last_non_empty_lines_stripped() -> None:
    assert tail("a\n\n  b  \nc\nd\n\n") == "b | c | d"
    assert tail("x\ny\n", 1) == "y"
    assert tail("x\ny", separator="; ") == "x; y"
    assert tail("") == tail(None) == tail(" \n\n") == "no output"
    assert tail("", empty="?") == "?"
