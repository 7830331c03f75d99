"""Drive Bazel to build the workspace's wheels, as jax's ``build/build.py`` drives jaxlib's.

:func:`build` runs ``bazelisk build`` (falling back to ``bazel``) in the workspace with the
interpreter passed as ``--repo_env=PYTHON_BIN_PATH`` and, for ``local_xla``, the XLA tree as
``--repo_env=JAXREL_LOCAL_XLA``; Bazel's own progress lines stream to stderr. It reads the
built wheels from Bazel's build event protocol and copies them into the output directory
atomically. A failure is one line: Bazel's first error, with its fix when the rule gave one.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from jaxrel._util import localfiles, procs
from jaxrel._util.atomic import copy_atomically
from jaxrel._util.text import tail
from jaxrel.errors import BadInput, EnvironmentFailure, ExitCode

__all__ = ["BAZEL_CPUS", "BuildError", "BuildResult", "INSTALL_HINT", "LOCAL_BAZELISK", "WHEEL_RULE", "build",
    "built_files", "cross_options", "find_launcher", "find_workspace", "first_error", "host_python", "wheel_targets"]

WHEEL_RULE = "py_wheel_file"  # bazel/wheel.bzl
LOCAL_BAZELISK = Path("build/tools/node_modules/.bin/bazelisk")  # scripts/install_build_tools.sh puts it here
INSTALL_HINT = "run scripts/install_build_tools.sh (or nox -s build), which installs Bazel and bazelisk"


class BuildError(EnvironmentFailure):
    """Bazel is missing or the build failed; the message is one line naming the fix."""


@dataclass
class BuildResult:
    """The wheels copied to the output directory and how long Bazel took."""

    wheels: list[Path]
    seconds: float
    command: list[str] = field(default_factory=list)


def find_workspace(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding a ``WORKSPACE`` file, or ``None``."""
    for directory in (start.resolve(), *start.resolve().parents):
        if (directory / "WORKSPACE").is_file():
            return directory
    return None


def find_launcher(workspace: Path) -> list[str]:
    """bazelisk from ``build/tools`` (see :data:`LOCAL_BAZELISK`) or ``PATH``, else ``bazel``."""
    local = workspace / LOCAL_BAZELISK
    if os.access(local, os.X_OK):
        return [str(local)]
    for name in ("bazelisk", "bazel"):
        found = shutil.which(name)
        if found:
            return [found]
    raise BuildError(f"neither bazelisk nor bazel is installed; {INSTALL_HINT}")


def host_python() -> str:
    """The interpreter running jaxrel, outside any virtual environment (same headers, stable path)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


BAZEL_CPUS = {"x86_64": "k8", "aarch64": "aarch64"}  # platform.machine() → Bazel's --cpu (bazel/zig_pins.bzl)
PORTABLE = "--config=manylinux"  # .bazelrc: the Zig toolchain, for any machine in BAZEL_CPUS


def interpreter_machine(python: str) -> str:
    """The machine ``python`` runs as (``platform.machine()``): another one for a launcher under qemu-user."""
    try:
        done = procs.run([python, "-c", "import platform; print(platform.machine())"], timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BuildError(f"--python {python} could not be run ({error}); pass a working interpreter",
                         exit_code=ExitCode.BAD_INPUT) from None
    if done.returncode != 0 or not done.stdout.strip():
        raise BuildError(f"--python {python} could not be run (exit {done.returncode}); pass a working interpreter",
                         exit_code=ExitCode.BAD_INPUT)
    return str(done.stdout.strip().splitlines()[-1])


def cross_options(python: str | None, bazel_options: Sequence[str]) -> list[str]:
    """``--cpu`` for a portable build (``--config=manylinux``) for another machine's Python (Debian's arm64 one
    under qemu-user: scripts/aarch64_python.sh), so the Zig toolchain targets that machine; nothing for this
    machine's Python, a ``--cpu`` already given, or the host's own compiler (the wheel builder refuses that)."""
    if python is None or PORTABLE not in bazel_options or any(o.startswith("--cpu") for o in bazel_options):
        return []
    machine = interpreter_machine(python)
    if machine == platform.machine():
        return []
    if machine not in BAZEL_CPUS:
        raise BuildError(f"--python {python} runs as {machine}; portable wheels are built for "
                         f"{', '.join(BAZEL_CPUS)}", exit_code=ExitCode.BAD_INPUT)
    return [f"--cpu={BAZEL_CPUS[machine]}"]


def wheel_targets(wheels: Sequence[str]) -> list[str]:
    """Labels to build: ``--wheels`` items as labels (``rmsnorm`` means ``//rmsnorm:wheel``), or ``//...``
    (every target; the wheels among the outputs are kept), which saves a ``bazel query``."""
    if not wheels:
        return ["//..."]
    return [w if w.startswith(("//", "@", ":")) else f"//{w}:wheel" for w in wheels]


TOOL_PREFIXES = ("wheel_builder: ",)  # bazel/wheel_builder.py's one-line refusals, printed under Bazel's ERROR


def first_error(lines: Sequence[str]) -> str:
    """The most useful single line of Bazel's output: a rule's ``fail()`` message, else what one of the
    workspace's own tools said when it refused (``wheel_builder: …``), else the first ERROR."""
    for line in lines:
        if "Error in fail:" in line:
            return line.split("Error in fail:", 1)[1].strip()
    for line in lines:
        if line.startswith(TOOL_PREFIXES):
            return line.strip()
    for line in lines:
        if line.startswith("ERROR:"):
            return line[len("ERROR:"):].strip()
    return tail("\n".join(lines), 1, empty="bazel failed with no output")


def built_files(events_path: Path) -> list[Path]:
    """Files named by the build event protocol's ``namedSetOfFiles`` events."""
    files = []
    try:
        events = [localfiles.loads_json(line, f"Bazel's build events {events_path}")
                  for line in localfiles.read_text(events_path).splitlines() if line.strip()]
    except BadInput as error:
        raise EnvironmentFailure(f"{error}; rerun the build") from None
    for event in events:
        named = event.get("namedSetOfFiles") if isinstance(event, dict) else None
        for entry in named.get("files", []) if isinstance(named, dict) else []:
            uri = entry.get("uri", "") if isinstance(entry, dict) else ""
            if isinstance(uri, str) and uri.startswith("file://"):
                files.append(Path(unquote(urlparse(uri).path)))
    return files


def build(
    workspace: Path,
    *,
    wheels: Sequence[str] = (),
    python: str | None = None,
    local_xla: Path | None = None,
    bazel_options: Sequence[str] = (),
    output: Path = Path("dist"),
    progress: Callable[[str], None] | None = None,
) -> BuildResult:
    """Build the wheel targets and copy the wheels into ``output``."""
    workspace = workspace.resolve()
    if not (workspace / "WORKSPACE").is_file():
        raise BuildError(f"{workspace} has no WORKSPACE file; run from the repository root or pass --workspace",
                         exit_code=ExitCode.BAD_INPUT)
    launcher = find_launcher(workspace)
    # One spelling per interpreter: a changed PYTHON_BIN_PATH re-runs the repository rules. The fetching rules
    # run on jaxrel's own interpreter (the one built for may be another machine's, under qemu-user).
    repo_env = [f"--repo_env=PYTHON_BIN_PATH={os.path.realpath(python) if python else host_python()}",
                f"--repo_env=JAXREL_FETCH_PYTHON={host_python()}"]
    if local_xla is not None:
        tree = local_xla.resolve()
        if not (tree / "xla/ffi/api/c_api.h").is_file():
            raise BuildError(f"--local-xla {local_xla}: no xla/ffi/api/c_api.h there; pass the root of an XLA tree",
                             exit_code=ExitCode.BAD_INPUT)
        repo_env.append(f"--repo_env=JAXREL_LOCAL_XLA={tree}")
    targets = wheel_targets(wheels)
    bazel_options = [*bazel_options, *cross_options(python, bazel_options)]
    with tempfile.TemporaryDirectory(prefix="jaxrel-build-") as scratch:
        events = Path(scratch) / "events.json"
        command = [*launcher, "build", "--color=no", "--curses=no", f"--build_event_json_file={events}",
                   *repo_env, *bazel_options, *targets]
        started = time.perf_counter()
        lines = _run_streaming(command, workspace, progress)
        seconds = time.perf_counter() - started
        if lines is not None:
            # a rule's fail() or a tool's refusal is the workspace's own configuration or options (a wrong pin, the
            # toolchain of another machine): bad input; anything else (a compiler error, a crash) is the build
            # environment failing
            refused = any("Error in fail:" in line or line.startswith(TOOL_PREFIXES) for line in lines)
            raise BuildError(f"bazel build failed: {first_error(lines)}",
                             exit_code=ExitCode.BAD_INPUT if refused else None)
        built = [f for f in built_files(events) if f.suffix == ".whl"]
    if not built:
        raise BuildError(f"bazel built no wheel for {' '.join(targets)}; name {WHEEL_RULE} targets with --wheels",
                         exit_code=ExitCode.BAD_INPUT)
    output.mkdir(parents=True, exist_ok=True)
    copied = [copy_atomically(wheel, output) for wheel in built]
    return BuildResult(wheels=copied, seconds=seconds, command=command)


def _run_streaming(command: list[str], cwd: Path, progress: Callable[[str], None] | None) -> list[str] | None:
    """Run ``command``, passing its lines to ``progress``; ``None`` on success, else all output lines."""
    process = procs.popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: deque[str] = deque(maxlen=10_000)  # the end of Bazel's output holds its errors
    assert process.stdout is not None
    try:
        for line in process.stdout:
            line = line.rstrip("\n")[:10_000]
            lines.append(line)
            if progress is not None and line.strip():
                progress(line)
        code = process.wait()
    except BaseException:  # Ctrl-C: Bazel's client goes, whole (its server stays, as bazel leaves it)
        procs.stop(process)
        raise
    return None if code == 0 else list(lines)
