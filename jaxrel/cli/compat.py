"""``jaxrel compat``: run the compat matrix (an environment per cell, the guard, the suites) and write reports."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from jaxrel.bisect import command
from jaxrel.cells import owntests, records
from jaxrel.cells.plugin_install import MODES
from jaxrel.cells.suites import DEFAULT_SUITE
from jaxrel.cli import _matrix
from jaxrel.cli._common import UsageError, add_common, add_env_option, bazel_options, env_pairs, say
from jaxrel.cli._record import add_record_options, record
from jaxrel.compat import report
from jaxrel.compat.cell import CellResult
from jaxrel.compat.options import Options
from jaxrel.compat.run import run as run_matrix
from jaxrel.distributions.archives import verify_record
from jaxrel.distributions.bazel import find_workspace
from jaxrel.distributions.filenames import wheel_tags
from jaxrel.family import ConfigError, Family
from jaxrel.release.project import open_project

HELP = "Run the compat matrix: an environment per cell, the guard, the compat suite, the frontend's tests; reports."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("compat", help=HELP, description=HELP))
    _matrix.add_options(sub)
    sub.add_argument("--cell", action="append", metavar="ID", help="run only cells matching ID (* wildcards)")
    sub.add_argument("--frontend-tests", action="extend", nargs="+", default=[], metavar="PATH|NODEID",
                     help="the frontend's own tests to run: files, directories or pytest node ids, relative to its "
                          "source tree (default: the family's "
                          "selection, e.g. a few minutes of jax's fast tests; else tests/)")
    sub.add_argument("-k", metavar="EXPR", help="narrow the frontend's own tests (pytest -k)")
    add_env_option(sub)
    sub.add_argument("--good", metavar="REV", help="with --frontend-src: the good revision in the jaxrel bisect "
                     "command printed for a compat regression (default: the newest release tag HEAD contains)")
    sub.add_argument("--test-requirements", metavar="PATH",
                     help="the requirements file the own tests need (default: the family's, e.g. jax's "
                          "build/test-requirements.txt in the tree); installed in positive cells")
    sub.add_argument("--no-frontend-tests", action="store_true", help="do not run the frontend's own tests")
    sub.add_argument("--full-plugin-cells", action="store_true",
                     help="run the whole compat suite in plugin cells whose device is not here too (default: their "
                          "plugin tests only when a plain cell of the same Python and backend runs it on the CPU)")
    sub.add_argument("--plugin-install", choices=MODES, default="auto",
                     help="what plugin cells install: full (the plugin's extra as pip resolves it, e.g. jax[cuda13]'s "
                          "NVIDIA wheels), light (the plugins only; the extra is still resolved) or auto (the "
                          "default: full where the cell's device is, e.g. an NVIDIA GPU, else light)")
    sub.add_argument("--shard", metavar="I/N", help="run only the I-th of N shares of each suite's tests "
                     "(jaxrel matrix --format github --shards N fans them out)")
    sub.add_argument("--jobs", default="auto", metavar="N|auto",
                     help="pytest-xdist workers for the own tests (default auto: one per core when the cell has "
                          "pytest-xdist, as jax's test requirements bring; 1: none)")
    sub.add_argument("--cells-at-once", default="auto", metavar="N|auto",
                     help="cells run side by side (default auto: 2 on a machine with two or more cores, "
                          "1 when the frontend's own tests run, which use the cores inside each cell)")
    sub.add_argument("--suite", default=None, metavar="PATH",
                     help="the compat suite (default: the one shipped inside jaxrel, for the jax profile only)")
    sub.add_argument("--workspace", default=None, metavar="DIR",
                     help="the Bazel workspace whose wheels (e.g. an XLA FFI extension) join every cell "
                          "(default: the nearest WORKSPACE at or above the working directory)")
    sub.add_argument("--no-uv", action="store_true", help="build cell environments with venv + pip")
    add_record_options(sub)
    sub.add_argument("--no-compile-cache", action="store_true",
                     help="compile every program of the compat suite anew (default: XLA's compiled programs are "
                          "kept per backend build in WORKDIR/xla-cache and reused by later runs; every test, trace "
                          "and lowering still runs)")
    sub.add_argument("--no-extension", action="store_true",
                     help="do not build the workspace's wheels with Bazel and add them to the cells")
    sub.add_argument("--bazel-options", action="append", default=None, metavar="'OPTS'",
                     help="options for building the workspace's wheels (default: the bazel-options the workspace's "
                          "release builds them with, e.g. --config=manylinux, so the cells test the wheels users get; "
                          "'' for Bazel's defaults)")
    sub.add_argument("--extension-wheels", default=None, metavar="DIR",
                     help="install the wheels in DIR (e.g. the release's build of the extension) in every cell they "
                          "install on, instead of building the workspace's with Bazel")
    sub.set_defaults(run=run)


def _workspace(text: str | None) -> Path | None:
    if text is None:
        return find_workspace(Path.cwd())
    workspace = Path(text).resolve()
    if not (workspace / "WORKSPACE").is_file():
        raise UsageError(f"--workspace {text}: no WORKSPACE file there; pass the root of a Bazel workspace")
    return workspace


def _extension_dir(args: argparse.Namespace) -> Path | None:
    """``--extension-wheels DIR``: a folder of wheels (names, archives and RECORDs checked), given instead of a
    workspace to build."""
    if args.extension_wheels is None:
        return None
    given = f"--extension-wheels {args.extension_wheels}"
    clash = [flag for flag, on in (("--no-extension", args.no_extension), ("--workspace", args.workspace is not None),
                                   ("--bazel-options", args.bazel_options is not None)) if on]
    if clash:
        raise UsageError(f"{given}: the wheels are built already; drop {' and '.join(clash)}")
    folder = Path(args.extension_wheels)
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if not wheels:
        raise UsageError(f"{given}: no wheel files (*.whl) there; pass the folder a build wrote them to")
    for wheel in wheels:  # a name no wheel has, a damaged or tampered file: one line, exit 2
        wheel_tags(wheel.name)
        verify_record(wheel)
    return folder


def _extension_options(args: argparse.Namespace, workspace: Path | None) -> tuple[str, ...]:
    """How the workspace's wheels are built: ``--bazel-options``, else as the workspace's release builds them
    (its Bazel components' shared ``bazel-options``), else Bazel's defaults, saying why."""
    if args.bazel_options is not None:
        return tuple(bazel_options(args.bazel_options))
    if workspace is None:
        return ()
    if not (workspace / "pyproject.toml").is_file():
        return ()  # no release declared there: nothing to match
    try:
        with open_project(workspace) as project:
            shared = project.release.shared_bazel_options()
    except ConfigError as error:
        say(f"extension: built with Bazel's defaults, not as released: {error}")
        return ()
    if shared is None:
        say("extension: built with Bazel's defaults: the release builds its Bazel components with different "
            "bazel-options; pass --bazel-options to choose")
        return ()
    return shared


def _shard(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        index, count = records.parse_shard(text)
    except ValueError:
        raise UsageError(f"--shard {text!r}: expected I/N with 1 <= I <= N (e.g. 2/4)") from None
    return f"{index}/{count}"


def _count(option: str, text: str) -> int | None:
    """A count of 1 or more given as ``option``, or ``None`` for ``auto``."""
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{option} {text!r}: expected a number (1 or more) or auto")
    return int(text)


def _suite(args: argparse.Namespace, family: Family) -> Path | None:
    if args.suite is None:
        return DEFAULT_SUITE if family.compat_suite else None
    suite = Path(args.suite).resolve()
    if not (suite / "pytest.ini").is_file():
        raise UsageError(f"--suite {args.suite}: no pytest.ini there; pass a compat suite directory")
    return suite


def _request(args: argparse.Namespace) -> owntests.Request:
    if args.no_frontend_tests and (args.frontend_tests or args.k or args.test_requirements):
        raise UsageError("--no-frontend-tests cannot be combined with --frontend-tests, -k or --test-requirements")
    requirements = Path(args.test_requirements).resolve() if args.test_requirements else None
    return owntests.Request(tuple(args.frontend_tests), args.k, requirements, not args.no_frontend_tests)


def _bisect_commands(args: argparse.Namespace, family: Family, commit: str | None,
                     results: list[CellResult], test_env: tuple[tuple[str, str], ...]) -> list[str]:
    """A ``jaxrel bisect`` command per cell whose own tests show a compat regression (``--frontend-src`` only)."""
    if not args.frontend_src:
        return []
    regressed = {r.cell.id: [f.test for f in r.failures if f.verdict == "compat regression" and f.suite == "own tests"]
                 for r in results}
    regressed = {cell: tests for cell, tests in regressed.items() if tests}
    return command.suggested_commands(args.frontend_src, family.frontend.distribution, commit, regressed,
                                            good=args.good, keyword=args.k, test_env=test_env)


def run(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir).resolve()
    _matrix.check_sources(args)
    if args.as_of and args.no_uv:
        raise UsageError(f"--as-of {args.as_of}: resolving as of a time needs uv (pip has no --exclude-newer); "
                         "drop --no-uv")
    if args.good and not args.frontend_src:
        raise UsageError(f"--good {args.good}: a revision of what? pass --frontend-src PATH (a git checkout) too")
    shard, jobs, request = _shard(args.shard), _count("--jobs", args.jobs), _request(args)
    test_env = env_pairs(args.env)  # bad input is reported before anything is built
    at_once = _count("--cells-at-once", args.cells_at_once)
    extension_dir = _extension_dir(args)
    workspace = None if args.no_extension or extension_dir else _workspace(args.workspace)
    extension_options = _extension_options(args, workspace)
    report.clear(workdir)  # an earlier run's reports never outlive this one's start
    found = _matrix.inputs(args, build=True)
    matrix, front = found.matrix, found.frontend
    own, notes = owntests.plan(found.family, front.source_tree, request, workdir / "frontend" / "tests")
    matrix.notes.extend(notes)
    cells = f"{len(matrix.cells)} cell{'' if len(matrix.cells) == 1 else 's'}"
    say(f"compat: {front.spec.name} {front.spec.version} ({front.spec.source}), {cells}"
        + (f", own tests {' '.join(own.suite.paths)}" if own else ", no own tests")
        + (f", shard {shard}" if shard else ""))

    recorded = {"commit": front.commit, "dirty": front.dirty, "source": front.spec.source} if front.commit else {}

    def checkpoint(results: list[CellResult]) -> None:
        report.write(workdir, matrix, results, complete=False, frontend_build_seconds=front.build_seconds,
                     frontend=recorded)

    options = Options(workdir=workdir, suite=_suite(args, found.family), own=own, shard=shard, jobs=jobs,
                      cells_at_once=at_once, exclude_newer=_matrix.exclude_newer(_matrix.as_of(args.as_of)),
                      use_uv=False if args.no_uv else None, extensions=not args.no_extension,
                      workspace=workspace, bazel_options=extension_options, extension_dir=extension_dir,
                      index=found.index, checkpoint=checkpoint,
                      test_env=test_env, full_plugin_cells=args.full_plugin_cells, plugin_install=args.plugin_install,
                      compile_cache=not args.no_compile_cache)
    results = run_matrix(matrix, found.family, front, options)
    commands = _bisect_commands(args, found.family, front.commit, results, test_env)
    json_path, md_path = report.write(workdir, matrix, results, frontend_build_seconds=front.build_seconds,
                                      frontend=recorded, bisect=commands)
    if args.json:
        print(json.dumps(report.to_json(matrix, results, frontend_build_seconds=front.build_seconds,
                                        frontend=recorded, bisect=commands), indent=2))
    else:
        print(report.table(results))
        print(report.summary(results))
        for note in matrix.notes:
            print(f"note: {note}")
        for line in commands:
            print(f"bisect: {line}")
        print(f"reports: {json_path}, {md_path}, {workdir / 'junit'}/")
    record(args, json_path)
    return 0 if all(r.ok for r in results) else 1

