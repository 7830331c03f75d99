"""`jaxrel verdict` and `jaxrel doctor` on the command line: output, JSON and exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import jaxrel
from jaxrel.cli import VERBS, build_parser, main

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_verdict_compatible_exit_0(capsys):
    code, out, _ = run(capsys, "verdict", "jax==0.12.0.1", "jaxlib==0.12.0")
    assert code == 0
    assert "jax 0.12.0.1, jaxlib 0.12.0: compatible" in out
    assert "minimum jaxlib: 0.11.2 (declared by jax 0.12.0.1)" in out


def test_verdict_incompatible_prints_rule_and_fix_exit_1(capsys):
    code, out, _ = run(capsys, "verdict", "jax==0.12.0", "jaxlib==0.12.0.1")
    assert code == 1
    assert "INCOMPATIBLE" in out and "backend-not-newer-than-frontend" in out
    assert 'fix: pip install "jaxlib>=0.11.2,<=0.12.0"' in out


def test_verdict_json_is_stable(capsys):
    code, out, _ = run(capsys, "verdict", "jax==0.10.2", "jaxlib==0.6.2", "jax-cuda12-plugin==0.10.2", "--json")
    data = json.loads(out)
    assert code == 1
    assert {"compatible", "reasons", "fix", "rules_checked", "rules_skipped", "pins", "minimum_backend"} <= set(data)
    assert data["compatible"] is False
    assert [r["rule"] for r in data["reasons"]] == ["backend-at-least-minimum", "plugin-matches-backend"]
    assert data["fix"] == 'pip install "jaxlib>=0.10.1,<=0.10.2"'
    assert data["minimum_backend"] == "0.10.1"


def test_min_backend_option_and_dev_frontend(capsys):
    code, out, _ = run(capsys, "verdict", "jax==0.4.36.dev20241119+gabc", "jaxlib==0.4.36", "--min-backend", "0.4.35")
    assert code == 0, out
    code, out, _ = run(capsys, "verdict", "jax==0.4.36.dev20241119+gabc", "jaxlib==0.4.35", "--min-backend", "0.4.36")
    assert code == 1 and "backend-at-least-minimum" in out


def test_unknown_minimum_is_reported_as_not_checked(capsys):
    code, out, _ = run(capsys, "verdict", "jax==9.0.0", "jaxlib==9.0.0")
    assert code == 0
    assert "backend-at-least-minimum: not checked (no minimum backend given)" in out


def test_unreleased_minimum_is_a_warning_not_a_refusal(capsys):
    code, out, _ = run(capsys, "verdict", "jax==0.4.33", "jaxlib==0.4.33", "--min-backend", "0.4.32")
    assert code == 0 and "! minimum-is-released" in out and "0.4.31" in out
    code, out, _ = run(capsys, "verdict", "jax==0.4.33", "jaxlib==0.4.33", "--min-backend", "0.4.32", "--json")
    assert [w["rule"] for w in json.loads(out)["warnings"]] == ["minimum-is-released"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["verdict", "jax==banana", "jaxlib==0.4"], "jax 'banana' is not a PEP 440 version"),
        (["verdict", "jax==0.4.30", "jaxlib==1!0.4.30"], "has an epoch"),
        (["verdict", "jax=0.4.30", "jaxlib==0.4.30"], "expected NAME==VERSION"),
        (["verdict", "jax==0.4.30"], "give the backend version: jaxlib==VERSION"),
        (["verdict", "torch==2.0", "jaxlib==0.4.30"], "'torch' is not part of family 'jax'"),
        (["verdict", "jax==0.4.30", "jaxlib==0.4.30", "--min-backend", "x"], "--min-backend 'x'"),
        (["verdict", "jax==0.4.30", "jaxlib==0.4.30", "--family", "/nonexistent/pyproject.toml"], "file not found"),
        (["doctor", "--python", "/nonexistent/python"], "cannot run Python interpreter"),
        (["compat", "--shard", "0/2"], "--shard '0/2': expected I/N with 1 <= I <= N"),
        (["compat", "--shard", "one/two"], "--shard 'one/two': expected I/N"),
        (["compat", "--jobs", "0"], "--jobs '0': expected a number (1 or more) or auto"),
        (["compat", "--cells-at-once", "two"], "--cells-at-once 'two': expected a number (1 or more) or auto"),
        (["compat", "--no-frontend-tests", "-k", "jit"], "--no-frontend-tests cannot be combined"),
        (["compat", "--ref", "HEAD~1"], "--ref HEAD~1: pass --frontend-src PATH"),
        (["matrix", "--ref", "HEAD~1"], "--ref HEAD~1: pass --frontend-src PATH"),
        (["matrix", "--shards", "0"], "--shards 0: expected 1 or more"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert expected in err and err.count("\n") == 1


def test_console_entry_point_runs_as_module():
    done = subprocess.run([sys.executable, "-m", "jaxrel", "verdict", "jax==banana", "jaxlib==0.4"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip() == "jaxrel verdict: error: jax 'banana' is not a PEP 440 version (expected e.g. 0.4.30)"


def test_the_command_line_does_not_need_pytest():
    """jaxrel depends on packaging only; pytest is installed in compat cells, not beside jaxrel."""
    done = subprocess.run([sys.executable, "-c", "import sys; sys.modules['pytest'] = None; import jaxrel.cli; "
                           "jaxrel.cli.build_parser()"],  # every verb's module
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_a_run_loads_its_own_verb_alone() -> None:
    script = ("import sys\nfrom jaxrel.cli import main\ncode = main(['verdict', 'jax==0.4.30', 'jaxlib==0.4.30'])\n"
              "print(code, sorted(m for m in sys.modules if m.startswith('jaxrel.')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    code, loaded = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert code == "0", done.stdout + done.stderr
    assert "'jaxrel.cli.verdict'" in loaded
    for other in ("jaxrel.cli.atlas", "jaxrel.cli.compat", "jaxrel.cli.release", "jaxrel.cells.environment"):
        assert f"'{other}'" not in loaded, other


def test_version_loads_no_verb() -> None:
    """``jaxrel --version`` built every verb's parser (0.45 s); it needs none (0.16 s)."""
    script = ("import sys\nfrom jaxrel.cli import main\ntry:\n    main(['--debug', '--version'])\n"
              "except SystemExit as done:\n    print(done.code)\n"
              f"print(sorted(m for m in sys.modules if m.startswith('jaxrel.cli.') and m[11:] in {VERBS!r}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    version, code, loaded = done.stdout.strip().splitlines()
    assert version == f"jaxrel {jaxrel.__version__}" and code == "0", done.stdout + done.stderr
    assert loaded == "[]", "no verb's module"


def _verb_help(parser: argparse.ArgumentParser, verb: str) -> str:
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    return choices[verb].format_help()


def test_each_verb_alone_is_the_verb_of_the_whole_command_line() -> None:
    whole = build_parser()
    for verb in VERBS:
        assert _verb_help(build_parser(verb), verb) == _verb_help(whole, verb), verb


@pytest.mark.parametrize("argv", [["--help"], ["-h", "gates"], ["nosuch"], ["--debug", "nosuch"], []])
def test_help_or_no_known_verb_is_answered_from_the_whole_command_line(capsys, argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    out, err = capsys.readouterr()
    for verb in VERBS:
        assert verb in out + err, (argv, verb)


def test_python_option_takes_a_version_a_path_or_a_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``--python`` of build and release build: a bare command is looked up on PATH, not taken as ./NAME."""
    import os

    from jaxrel.cli._common import UsageError, python_path

    found = tmp_path / "python3.11"
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert python_path("python3.11", "--python") == str(found)
    assert python_path("/opt/py/bin/python3", "--python") == "/opt/py/bin/python3"
    assert python_path(None, "--python") is None
    with pytest.raises(UsageError, match=r"--python pythonX: no such command on PATH; give a version \(3.12\)"):
        python_path("pythonX", "--python")


@pytest.mark.parametrize("verb", [["build"], ["release", "build", "--component", "jaxrel-rmsnorm"]])
def test_an_unknown_python_command_is_one_line(verb: list[str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*verb, "--python", "no-such-python", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--python no-such-python: no such command on PATH" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
