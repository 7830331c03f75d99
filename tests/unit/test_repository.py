"""The README's two commands and CI agree."""

from __future__ import annotations

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
