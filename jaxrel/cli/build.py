"""``jaxrel build``: build the workspace's wheels with Bazel (bazelisk, else bazel) into ``--output``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from jaxrel.cli._common import UsageError, add_common, bazel_options, emit, python_path, say
from jaxrel.distributions.bazel import build
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


def run(args: argparse.Namespace) -> int:
    wheels = [w for item in args.wheels for w in item.split(",") if w]
    extra = bazel_options(args.bazel_options)
    if "all" in wheels and len(wheels) > 1:
        raise UsageError("--wheels all builds the whole release grid; give it alone, or name the targets")
    groups = release_grid(Path(args.workspace)) if wheels == ["all"] else {(): wheels}
    built, seconds, commands = [], 0.0, []
    for options, targets in groups.items():
        result = build(Path(args.workspace), wheels=targets, python=python_path(args.python, "--python"),
                       local_xla=Path(args.local_xla) if args.local_xla else None, bazel_options=[*options, *extra],
                       output=Path(args.output), progress=None if args.quiet else say)
        built += result.wheels
        seconds += result.seconds
        commands.append(result.command)
    data = {"wheels": [str(w) for w in built], "seconds": round(seconds, 3),
            "command": commands[0] if len(commands) == 1 else commands}
    text = "\n".join([*(f"{wheel}  ({wheel.stat().st_size / 1024:.1f} KiB)" for wheel in built),
                      f"bazel: {seconds:.1f} s"])
    emit(args, data, text)
    return 0
