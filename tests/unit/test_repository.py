"""The README's two commands and CI agree."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    title, _, line, _, rest = text.split("\n", 4)
    assert title == "# jaxrel" and line, "README.md opens with the name and one line"
    assert rest.startswith("```bash\n"), "then the two commands"
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands():
    commands = readme_commands()
    assert len(commands) == 2
    assert all(command.startswith("python3 -m pip install") for command in commands)
    assert commands[0].endswith("nox -s compat"), "the first command is the main job"
    assert "def compat(" in (ROOT / "noxfile.py").read_text()


def test_ci_runs_the_readme_test_command():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert readme_commands()[1] in ci


def _build_tool_options() -> dict[str, tuple[str, ...]]:
    """Session name → the options its ``_build_tools`` call passes to scripts/install_build_tools.sh."""
    found: dict[str, tuple[str, ...]] = {}
    for node in ast.parse((ROOT / "noxfile.py").read_text()).body:
        if isinstance(node, ast.FunctionDef):
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "_build_tools":
                    found[node.name] = tuple(arg.value for arg in call.args[1:] if isinstance(arg, ast.Constant))
    return found


def test_only_sessions_that_run_tests_install_chromium_and_postgresql():
    """The main job and the builds need Bazel alone: a fresh machine's ``nox -s compat`` installs no browser."""
    options = _build_tool_options()
    assert {name for name, given in options.items() if given == ("--bazel-only",)} == {"compat", "build", "release"}
    assert {name for name, given in options.items() if given == ()} == {"tests", "bench"}
