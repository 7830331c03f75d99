"""``jaxrel build`` for another machine's Python: a portable build (``--config=manylinux``) gets that machine's
``--cpu`` (the Zig toolchain then targets it); the host's own toolchain is left alone (the wheel builder refuses
an object of another machine), and a Python that cannot run or runs as an unknown machine is refused."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest

from jaxrel.distributions.bazel import BuildError, cross_options
from jaxrel.errors import ExitCode


def _python(tmp_path: Path, body: str) -> str:
    """A stand-in interpreter: a script answering the machine probe as ``body`` says."""
    path = tmp_path / "python3.11"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(("machine", "expected"), [("aarch64", ["--cpu=aarch64"]), ("x86_64", ["--cpu=k8"])])
def test_another_machines_python_gets_its_cpu(tmp_path: Path, machine: str, expected: list[str]) -> None:
    if machine == platform.machine():
        pytest.skip(f"this machine is {machine}")
    assert cross_options(_python(tmp_path, f"echo {machine}"), ["--config=manylinux"]) == expected


def test_this_machines_python_and_the_host_toolchain_get_nothing(tmp_path: Path) -> None:
    assert cross_options(_python(tmp_path, f"echo {platform.machine()}"), ["--config=manylinux"]) == []
    never = _python(tmp_path, "exit 9")  # not even run: the options decide first
    assert cross_options(never, []) == []
    assert cross_options(never, ["--config=manylinux", "--cpu=aarch64"]) == []
    assert cross_options(never, ["--config=manylinux_aarch64"]) == []
    assert cross_options(None, ["--config=manylinux"]) == []


@pytest.mark.parametrize(("body", "message"), [
    ("echo riscv64", "runs as riscv64; portable wheels are built for x86_64, aarch64"),
    ("exit 9", "could not be run (exit 9); pass a working interpreter"),
])
def test_a_python_of_an_unknown_machine_or_that_does_not_run_is_refused(tmp_path: Path, body: str,
                                                                          message: str) -> None:
    with pytest.raises(BuildError, match=re.escape(message)) as refused:
        cross_options(_python(tmp_path, body), ["--config=manylinux"])
    assert refused.value.exit_code == ExitCode.BAD_INPUT


def test_a_missing_python_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="could not be run") as refused:
        cross_options(str(tmp_path / "nowhere" / "python3"), ["--config=manylinux"])
    assert refused.value.exit_code == ExitCode.BAD_INPUT
