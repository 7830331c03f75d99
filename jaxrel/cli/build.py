"""``jaxrel build``: build the workspace's wheels with Bazel (bazelisk, else bazel) into ``--output``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from jaxrel.cli._common import UsageError, add_common, bazel_options, emit, python_path, say
from jaxrel.distributions.bazel import build, host_python, interpreter_machine
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.distributions.pythons import all_pythons, free_threaded
from jaxrel.extension import xla
from jaxrel.extension.free_threaded import FreeThreadedSlot, plan_slots, shipped_abis
from jaxrel.release.project import open_project

HELP = "Build the workspace's wheels with Bazel (bazelisk, else bazel) into --output."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("build", help=HELP, description=HELP))
    sub.add_argument("--wheels", action="append", default=[], metavar="TARGET[,TARGET]|all",
                     help="wheel targets: labels or packages (rmsnorm = //rmsnorm:wheel); 'all': every wheel the "
                          "workspace's release builds with Bazel (manual CUDA targets included), each with its "
                          "component's bazel-options, for the machine of --python; default: every non-manual wheel "
                          "rule")
    sub.add_argument("--python", metavar="3.N|PATH",
                     help="build for this Python: a version, a path or a command (default: the one running jaxrel)")
    sub.add_argument("--no-free-threaded", action="store_true",
                     help="with --wheels all: build only the GIL grid, not a wheel for each free-threaded Python the "
                          "pinned backend ships for and an interpreter here runs")
    sub.add_argument("--local-xla", metavar="PATH", help="use the FFI headers of this XLA source tree, not the pin")
    sub.add_argument("--bazel-options", action="append", default=[], metavar="'OPTS'",
                     help="extra options for bazel build, e.g. '--config=x --jobs=2'")
    sub.add_argument("--output", default="dist", metavar="DIR", help="where the wheels go (default: dist)")
    sub.add_argument("--workspace", default=".", metavar="DIR", help="the Bazel workspace (default: .)")
    sub.add_argument("--quiet", action="store_true", help="do not stream Bazel's progress")
    sub.set_defaults(run=run)


def release_grid(workspace: Path) -> dict[tuple[str, ...], list[str]]:
    """``--wheels all``: the wheel targets of the workspace's release components built by Bazel, grouped by their
    ``bazel-options`` (one Bazel run per group)."""
    with open_project(workspace) as project:
        grid: dict[tuple[str, ...], list[str]] = {}
        for component in project.release.components:
            if component.build == "bazel":
                grid.setdefault(component.bazel_options, []).extend(component.targets)
    if not grid:
        raise UsageError(f"--wheels all: the release in {workspace} builds nothing with Bazel; name the targets")
    return grid


def free_threaded_slots(workspace: Path, python: str | None) -> tuple[list[FreeThreadedSlot], str]:
    """``--wheels all``: the free-threaded slots of the pinned backend for the machine of ``python`` (each with the
    interpreter here that builds it, or why not), and a note when they are unknown (the index not reached)."""
    pin = xla.read_pin(workspace / "WORKSPACE")
    machine = interpreter_machine(python or host_python())
    try:
        listing = Index.from_pip(progress=say).listing(pin.backend)
    except IndexClientError as error:
        return [], f"free-threaded slots unknown: {pin.backend}'s listing was not read ({error}); none built"
    abis = shipped_abis(listing, pin.backend_version, machine)
    here = {version: found for version, found in all_pythons().items()
            if free_threaded(version) and interpreter_machine(found.executable) == machine}
    return plan_slots(abis, here, f"{pin.backend} {pin.backend_version}"), ""


def run(args: argparse.Namespace) -> int:
    wheels = [w for item in args.wheels for w in item.split(",") if w]
    extra = bazel_options(args.bazel_options)
    if "all" in wheels and len(wheels) > 1:
        raise UsageError("--wheels all builds the whole release grid; give it alone, or name the targets")
    workspace, python = Path(args.workspace), python_path(args.python, "--python")
    groups = release_grid(workspace) if wheels == ["all"] else {(): wheels}
    # the whole grid, built for a Python with the GIL: each free-threaded slot too
    with_slots = wheels == ["all"] and not args.no_free_threaded and not (args.python or "").endswith("t")
    slots, note = free_threaded_slots(workspace, python) if with_slots else ([], "")
    built, seconds, commands = [], 0.0, []
    for interpreter in [python, *(slot.python.executable for slot in slots if slot.python)]:
        for options, targets in groups.items():
            result = build(workspace, wheels=targets, python=interpreter,
                           local_xla=Path(args.local_xla) if args.local_xla else None,
                           bazel_options=[*options, *extra], output=Path(args.output),
                           progress=None if args.quiet else say)
            built += result.wheels
            seconds += result.seconds
            commands.append(result.command)
    data: dict[str, Any] = {"wheels": [str(w) for w in built], "seconds": round(seconds, 3),
                            "command": commands[0] if len(commands) == 1 else commands}
    lines = [*(f"{wheel}  ({wheel.stat().st_size / 1024:.1f} KiB)" for wheel in built), f"bazel: {seconds:.1f} s"]
    if with_slots:
        data["free_threaded"] = [{"abi": s.abi, "built": s.python is not None,
                                  "python": s.python.executable if s.python else None, "reason": s.reason}
                                 for s in slots]
        lines += [f"free-threaded {s.abi}: " + (f"built with {s.python.executable}" if s.python
                                                else f"not built: {s.reason}") for s in slots]
        lines += [note] if note else ([] if slots else ["free-threaded: the backend ships no such wheel"])
        if note:
            data["free_threaded_note"] = note
    emit(args, data, "\n".join(lines))
    return 0
