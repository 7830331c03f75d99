"""The ``jaxrel`` command: each verb is thin over the modules that do the work.

Exit codes: 0 compatible / success, 1 incompatible, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from jaxrel import __version__, doctor, policy, releasedata
from jaxrel._util.atomic import read_exactly
from jaxrel.compat import report
from jaxrel.compat import runner as compat
from jaxrel.compat.envs import EnvError
from jaxrel.compat.index import Index, IndexClientError
from jaxrel.compat.matrix import BackendFilter, Matrix, MatrixError
from jaxrel.compat.pythons import PythonNotFound, python_for, supported_tags
from jaxrel.compat.wheels import WheelError
from jaxrel.extension import xla
from jaxrel.extension.bazel import BuildError, build
from jaxrel.family import ConfigError, Family, resolve_family
from jaxrel.gates import cover as gatecover
from jaxrel.gates import judge as gates
from jaxrel.gates import report as gatereport
from jaxrel.guard import canonical_name
from jaxrel.release import commands as release_commands
from jaxrel.release.publish import redact

EXIT_OK, EXIT_INCOMPATIBLE, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(ValueError):
    """Bad command-line input; reported as one line with exit code 2."""


def _parse_pin(text: str) -> tuple[str, str]:
    name, sep, version = text.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise UsageError(f"expected NAME==VERSION, got {text!r} (e.g. jax==0.12.0)")
    return name.strip(), version.strip()


def _pins_for(family: Family, texts: Sequence[str]) -> tuple[policy.Pin | None, policy.Pin, list[policy.Pin]]:
    """Sort NAME==VERSION arguments into frontend, backend and plugins of ``family``."""
    frontend = backend = None
    plugins: list[policy.Pin] = []
    for text in texts:
        name, version = _parse_pin(text)
        pin = policy.Pin(canonical_name(name), policy.parse_version(version, name))
        if pin.name == canonical_name(family.frontend.distribution):
            frontend = pin
        elif pin.name == canonical_name(family.backend.distribution):
            backend = pin
        elif family.plugin_for(pin.name):
            plugins.append(pin)
        else:
            known = [family.frontend.distribution, family.backend.distribution,
                     *(p.distribution for p in family.plugins)]
            raise UsageError(f"{name!r} is not part of family {family.name!r} (known: {', '.join(known)})")
    if backend is None:
        raise UsageError(f"give the backend version: {family.backend.distribution}==VERSION")
    return frontend, backend, plugins


def _minimum_for(family: Family, frontend: policy.Pin | None, given: str | None) -> tuple[Version | None, str]:
    """The minimum backend: ``--min-backend``, else the frontend release's declared minimum."""
    if given is not None:
        return policy.parse_version(given, "--min-backend"), "--min-backend"
    if frontend is not None:
        for version, minimum in family.frontend_minimums.items():
            if policy.parse_version(version) == frontend.version:
                return policy.parse_version(minimum), f"declared by {frontend}"
    return None, "unknown (pass --min-backend)"


def cmd_verdict(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    frontend, backend, plugins = _pins_for(family, args.pins)
    minimum, source = _minimum_for(family, frontend, args.min_backend)
    result = policy.verdict(backend=backend, frontend=frontend, minimum_backend=minimum, plugins=plugins,
                            exempt_plugins=family.unpinned(p.name for p in plugins),
                            released_backends=family.released_backends())
    if args.json:
        pins = {"frontend": frontend, "backend": backend}
        out: dict[str, Any] = {**result.to_json(), "family": family.name,
                               "pins": {role: pin and {"name": pin.name, "version": str(pin.version)}
                                        for role, pin in pins.items()},
                               "plugins": [{"name": p.name, "version": str(p.version)} for p in plugins],
                               "minimum_backend": minimum and str(minimum), "minimum_source": source}
        print(json.dumps(out, indent=2))
    else:
        listed = ", ".join(str(p) for p in (frontend, backend, *plugins) if p)
        print(f"{listed}: {'compatible' if result.compatible else 'INCOMPATIBLE'}")
        print(f"  minimum {family.backend.distribution}: {minimum or 'unknown'} ({source})")
        for violation in result.violations:
            print(f"  x {violation.rule}: {violation.message}")
        for warning in result.warnings:
            print(f"  ! {warning.rule}: {warning.message} ({warning.fix})")
        for rule, reason in result.skipped.items():
            print(f"  - {rule}: not checked ({reason})")
        if result.fix:
            print(f"fix: {result.fix}")
            for alternative in result.alternatives:
                print(f" or: {alternative}")
    return EXIT_OK if result.compatible else EXIT_INCOMPATIBLE


def cmd_doctor(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    env = doctor.inspect(family, args.python)
    result = doctor.diagnose(family, env)
    if args.json:
        print(json.dumps(doctor.to_json(family, env, result), indent=2))
    else:
        print(doctor.render(family, env, result))
    return EXIT_OK if result.compatible else EXIT_INCOMPATIBLE


def _backend_filter(text: str | None) -> BackendFilter | None:
    """``--backends``: a specifier (``>=0.11.2``) or comma-separated versions (``0.12.0,0.11.2``)."""
    if not text:
        return None
    items = [item.strip() for item in text.split(",") if item.strip()]
    try:
        return {Version(item) for item in items}
    except InvalidVersion:
        pass
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise UsageError(f"--backends {text!r}: expected a specifier (>=0.11.2) or versions (0.12.0,0.11.2)") from None


def _matrix_inputs(args: argparse.Namespace, build: bool) -> tuple[Family, Index, compat.PreparedFrontend, Matrix]:
    """The family, index, frontend and matrix that ``matrix`` and ``compat`` share."""
    if args.frontend and args.frontend_src:
        raise UsageError("pass --frontend NAME==V or --frontend-src PATH, not both")
    family = resolve_family(args.family)
    index = Index.from_pip(args.index_url, args.wheelhouse, refresh=args.refresh, progress=_say)  # to stderr
    workdir = Path(args.workdir)
    front = compat.prepare_frontend(
        family, index, workdir, source=Path(args.frontend_src).resolve() if args.frontend_src else None,
        requirement=args.frontend, build=build or bool(args.frontend_src),
    )
    if args.plugins is None:  # the family's first plugin set (cuda12 for jax), if it declares any
        sets = list(family.plugin_sets())[:1]
    elif args.plugins.strip() in ("", "none"):
        sets = []
    else:
        sets = [name.strip() for name in args.plugins.split(",") if name.strip()]
    pythons = [p.strip() for item in args.python for p in item.split(",") if p.strip()]
    matrix = compat.matrix_for(family, index, front.spec, pythons=pythons, backends=_backend_filter(args.backends),
                               plugin_sets=sets, plugins_on=args.plugins_on)
    if getattr(args, "cell", None):
        matrix = matrix.select(args.cell)
    return family, index, front, matrix


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_matrix(args: argparse.Namespace) -> int:
    _, _, _, matrix = _matrix_inputs(args, build=False)
    if args.format == "json":
        print(json.dumps(matrix.to_json(), indent=2))
    elif args.format == "github":
        print(matrix.to_github())
    else:
        print(matrix.to_markdown())
    return EXIT_OK


def cmd_compat(args: argparse.Namespace) -> int:
    family, _, front, matrix = _matrix_inputs(args, build=True)
    workdir = Path(args.workdir)
    _say(f"compat: {front.spec.name} {front.spec.version} ({front.spec.source}), {len(matrix.cells)} cells")
    options = compat.Options(workdir=workdir, suite=Path(args.suite).resolve(), keyword=args.k,
                             frontend_tests=args.frontend_tests, use_uv=False if args.no_uv else None,
                             extensions=not args.no_extension)
    results = compat.run(matrix, family, front, options)
    json_path, md_path = report.write(workdir, matrix, results)
    if args.json:
        print(json.dumps(report.to_json(matrix, results), indent=2))
    else:
        print(report.table(results))
        print(report.summary(results))
        for note in matrix.notes:
            print(f"note: {note}")
        print(f"reports: {json_path}, {md_path}, {workdir / 'junit'}/")
    return EXIT_OK if all(r.ok for r in results) else EXIT_INCOMPATIBLE


def _python_path(text: str | None) -> str | None:
    """``--python``: a version (``3.12``, found here) or an interpreter path."""
    if text is None or "/" in text:
        return text
    return python_for(text).executable


def cmd_build(args: argparse.Namespace) -> int:
    options = [option for text in args.bazel_options for option in shlex.split(text)]
    result = build(Path(args.workspace), wheels=[w for item in args.wheels for w in item.split(",") if w],
                   python=_python_path(args.python), local_xla=Path(args.local_xla) if args.local_xla else None,
                   bazel_options=options, output=Path(args.output), progress=None if args.quiet else _say)
    if args.json:
        print(json.dumps({"wheels": [str(w) for w in result.wheels], "seconds": round(result.seconds, 3),
                          "command": result.command}, indent=2))
    else:
        for wheel in result.wheels:
            print(f"{wheel}  ({wheel.stat().st_size / 1024:.1f} KiB)")
        print(f"bazel: {result.seconds:.1f} s")
    return EXIT_OK


def _pin_facts(family: Family, pin: xla.XlaPin) -> dict[str, str | None]:
    """What a pin means for extensions: its FFI API and the first backend release providing it."""
    try:
        row = releasedata.builtin(family.name).get(pin.backend, {}).get(pin.backend_version, {})
    except OSError:
        row = {}
    api = row.get("xla_ffi_api")
    minimum = releasedata.first_release_with_ffi_api(family.name, pin.backend, api) if api else None
    return {"xla_ffi_api": api, "minimum_backend": minimum}


def cmd_xla_show(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    pin = xla.read_pin(Path(args.workspace))
    facts = _pin_facts(family, pin)
    if args.json:
        print(json.dumps({**pin.to_json(), **facts, "workspace": args.workspace}, indent=2))
        return EXIT_OK
    rows = [("XLA commit", pin.commit), ("backend", f"{pin.backend} {pin.backend_version}"),
            ("headers from", pin.wheel), ("sha256", pin.sha256),
            ("XLA FFI API", facts["xla_ffi_api"] or "unknown (not in the release data)"),
            ("extensions require", f"{pin.backend}>={facts['minimum_backend']}" if facts["minimum_backend"]
             else "unknown")]
    width = max(len(key) for key, _ in rows)
    print(f"XLA pin in {args.workspace}:")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return EXIT_OK


def cmd_xla_pin(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    workspace = Path(args.workspace)
    current = xla.read_pin(workspace)
    policy.parse_version(args.version, f"--{family.backend.distribution}")
    index = Index.from_pip(args.index_url, args.wheelhouse, refresh=args.refresh, progress=_say)
    listing = index.listing(current.backend)
    python = ".".join(str(part) for part in sys.version_info[:2])
    pin = xla.pin_for(family.name, current.backend, args.version, listing, supported_tags(python), args.commit)
    changed = xla.write_pin(workspace, pin)
    if args.json:
        print(json.dumps({**pin.to_json(), **_pin_facts(family, pin), "changed": changed}, indent=2))
    else:
        verb = "pinned" if changed else "already pinned"
        print(f"{verb}: XLA {pin.commit} via {pin.wheel} (sha256 {pin.sha256[:16]}...) in {workspace}")
    return EXIT_OK


def cmd_gates(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    tree = Path(args.src)
    if not tree.is_dir():
        raise UsageError(f"{tree} is not a directory; pass a frontend source tree")
    try:
        declared, version, path = gatereport.declared_minimum(tree, family)
        source = str(path)
    except gatereport.MinimumNotFound:
        if not args.min_backend:
            raise
        declared, version, source = "", None, ""
    minimum = args.min_backend or declared
    source = "--min-backend" if args.min_backend else source
    found, failed = gates.find_gates(tree, family)
    maximum = policy.parse_version(version, "the tree's version") if version else None
    releases = gates.Releases.from_family(family, policy.parse_version(minimum, "minimum backend"), maximum)
    if not releases.supported:
        raise UsageError(f"no known {family.backend.distribution} release between {minimum} and {version or 'now'}")
    judgements = gates.judge_all(found, releases)
    header = (f"{tree}: {family.frontend.distribution} {version or '(version unknown)'}, minimum "
              f"{family.backend.distribution} {minimum} ({source}); supported releases "
              f"{releases.supported[0]}..{releases.supported[-1]}")
    if args.fix or args.diff:
        return _fix_gates(tree, judgements, write=args.fix, show_diff=args.diff)
    coverage = _gate_coverage(args.matrix, judgements, releases) if args.matrix else None
    if args.json:
        out = gatereport.to_json(judgements, minimum, source, failed)
        if coverage is not None:
            out["coverage"] = [c.to_json() for c in coverage]
        print(json.dumps(out, indent=2))
    elif args.markdown:
        print(gatereport.markdown(judgements, header))
    else:
        print(gatereport.text(judgements, header))
    if coverage is not None and not args.json:
        print(f"coverage of live gates by {args.matrix}:")
        for item in coverage:
            print(f"  {item.judgement.gate.file}:{item.judgement.gate.line}: {item.describe()}")
    for file, reason in failed.items():
        _say(f"jaxrel gates: warning: {file} not scanned: {reason}")
    return EXIT_OK


def _gate_coverage(path: str, judgements: list[gates.Judgement],
                   releases: gates.Releases) -> list[gatecover.Coverage]:
    try:
        matrix = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"--matrix {path}: cannot read a matrix JSON ({error}); "
                         "write one with jaxrel matrix --format json") from None
    return gatecover.cover(judgements, releases, gatecover.matrix_cells(matrix))


def _fix_gates(tree: Path, judgements: list[gates.Judgement], *, write: bool, show_diff: bool) -> int:
    """``--fix`` / ``--diff``: rewrite every decided gate, file by file; list what is refused."""
    import difflib

    from jaxrel.gates import fix as gatefix  # needs libcst (jaxrel[gates])

    by_file: dict[str, list[gates.Judgement]] = {}
    for judgement in judgements:
        by_file.setdefault(judgement.gate.file, []).append(judgement)
    fixes = {}
    for file, group in sorted(by_file.items()):
        original = read_exactly(tree / file)  # CRLF line ends kept as they are
        fixes[file] = (original, gatefix.fix_source(original, group))
    for file, (original, fix) in fixes.items():
        if show_diff and fix.source != original:
            sys.stdout.writelines(difflib.unified_diff(original.splitlines(keepends=True),
                                                       fix.source.splitlines(keepends=True), f"a/{file}", f"b/{file}"))
        for change in fix.changed:
            _say(f"{file}:{change}")
        for refusal in fix.refused:
            _say(f"{file}:{refusal} (refused)")
    if write:
        for file, (original, fix) in fixes.items():
            if fix.source != original:
                gatefix.write_atomically(tree / file, fix.source)
    changed = sum(1 for original, fix in fixes.values() if fix.source != original)
    refused = sum(len(fix.refused) for _, fix in fixes.values())
    _say(f"jaxrel gates: {'rewrote' if write else 'would rewrite'} {changed} files; {refused} decided gates refused")
    return EXIT_OK


def _matrix_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--frontend", metavar="NAME==V", help="a released frontend (default: the newest release's "
                     "sdist, built from source as the HEAD stand-in)")
    sub.add_argument("--frontend-src", metavar="PATH", help="a frontend source tree (e.g. a jax git checkout)")
    sub.add_argument("--python", action="append", default=[], metavar="3.N[,3.M]",
                     help="interpreters for the cells (default: the oldest one here that the frontend supports)")
    sub.add_argument("--backends", metavar="SPEC", help="only these backend releases: >=0.11.2 or 0.12.0,0.11.2")
    sub.add_argument("--plugins", default=None, metavar="SET[,SET]",
                     help="hardware plugin sets to add (default: the family's first, cuda12 for jax; 'none')")
    sub.add_argument("--plugins-on", choices=("newest", "all"), default="newest",
                     help="add plugin sets to the newest admitted backend only (default) or to every one")
    sub.add_argument("--index-url", metavar="URL", help="use only this index (default: pip's configuration)")
    sub.add_argument("--wheelhouse", action="append", default=[], metavar="DIR", help="also list wheels in DIR")
    sub.add_argument("--refresh", action="store_true", help="re-read index listings instead of the cache")
    sub.add_argument("--workdir", default="build/compat", metavar="DIR", help="downloads, envs, reports")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxrel", description="Release engineering for split wheels.")
    parser.add_argument("--version", action="version", version=f"jaxrel {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)

    def verb(name: str, help: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help, description=help)
        sub.add_argument("--family", default=None,
                         help="built-in profile name (default: jax) or path to a pyproject.toml with [tool.jaxrel]")
        sub.add_argument("--json", action="store_true", help="print a JSON object instead of text")
        return sub

    sub = verb("verdict", "Judge a set of pins: exit 0 compatible, 1 incompatible, 2 bad input.")
    sub.add_argument("pins", nargs="+", metavar="NAME==VERSION", help="e.g. jax==0.12.0 jaxlib==0.12.0.1")
    sub.add_argument("--min-backend", metavar="M", help="the frontend's minimum backend (default: from release data)")
    sub.set_defaults(run=cmd_verdict)

    sub = verb("doctor", "Inspect an environment's frontend, backend and plugins without importing the backend.")
    sub.add_argument("--python", metavar="PATH", help="interpreter of the environment to inspect (default: this one)")
    sub.set_defaults(run=cmd_doctor)

    sub = verb("matrix", "The compat matrix: frontend x backend releases x plugins x Python, with expected verdicts.")
    _matrix_options(sub)
    sub.add_argument("--format", choices=("markdown", "json", "github"), default="markdown",
                     help="github: a GitHub Actions strategy.matrix object (one job per cell)")
    sub.set_defaults(run=cmd_matrix)

    sub = verb("compat", "Run the compat matrix: an environment per cell, the guard, the compat suite; reports.")
    _matrix_options(sub)
    sub.add_argument("--cell", action="append", metavar="ID", help="run only cells matching ID (* wildcards)")
    sub.add_argument("-k", metavar="EXPR", help="select the frontend's own tests (with --frontend-src)")
    sub.add_argument("--frontend-tests", action="append", default=[], metavar="PATH",
                     help="the frontend's own test paths, relative to --frontend-src (default: tests)")
    sub.add_argument("--suite", default=str(compat.DEFAULT_SUITE), metavar="PATH", help="the compat suite")
    sub.add_argument("--no-uv", action="store_true", help="build cell environments with venv + pip")
    sub.add_argument("--no-extension", action="store_true",
                     help="do not build this repo's XLA FFI extension with Bazel and add it to the cells")
    sub.set_defaults(run=cmd_compat)

    sub = verb("gates", "Find and judge api-version gates (if jaxlib_extension_version >= N) in a source tree.")
    sub.add_argument("src", metavar="SRC", help="the frontend's source tree (e.g. an unpacked jax sdist)")
    sub.add_argument("--min-backend", metavar="V", help="the minimum backend (default: the tree's version file)")
    sub.add_argument("--markdown", action="store_true", help="print a Markdown report")
    sub.add_argument("--fix", action="store_true", help="rewrite always-true/always-false gates in place")
    sub.add_argument("--diff", action="store_true", help="show the rewrite as a unified diff, write nothing")
    sub.add_argument("--matrix", metavar="JSON", help="a compat matrix (jaxrel matrix --format json, or a "
                     "report.json): which sides of each live gate its cells exercise")
    sub.set_defaults(run=cmd_gates)

    sub = verb("build", "Build the workspace's wheels with Bazel (bazelisk, else bazel) into --output.")
    sub.add_argument("--wheels", action="append", default=[], metavar="TARGET[,TARGET]",
                     help="wheel targets: labels or packages (rmsnorm = //rmsnorm:wheel); default: all wheel rules")
    sub.add_argument("--python", metavar="3.N|PATH", help="build for this Python (default: the one running jaxrel)")
    sub.add_argument("--local-xla", metavar="PATH", help="use the FFI headers of this XLA source tree, not the pin")
    sub.add_argument("--bazel-options", action="append", default=[], metavar="'OPTS'",
                     help="extra options for bazel build, e.g. '--config=x --jobs=2'")
    sub.add_argument("--output", default="dist", metavar="DIR", help="where the wheels go (default: dist)")
    sub.add_argument("--workspace", default=".", metavar="DIR", help="the Bazel workspace (default: .)")
    sub.add_argument("--quiet", action="store_true", help="do not stream Bazel's progress")
    sub.set_defaults(run=cmd_build)

    release_commands.add_parser(verbs)

    sub = verb("xla", "Show or move the XLA pin in WORKSPACE.")
    actions = sub.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the pin and what it means for extensions")
    pin = actions.add_parser("pin", help="re-pin to the wheel of a backend release (file name, sha256, commit)")
    pin.add_argument("--jaxlib", "--backend-version", dest="version", required=True, metavar="X",
                     help="the backend release to take the FFI headers from")
    pin.add_argument("--commit", metavar="SHA", help="the XLA commit X was built from (default: the known one)")
    pin.add_argument("--index-url", metavar="URL", help="use only this index (default: pip's configuration)")
    pin.add_argument("--wheelhouse", action="append", default=[], metavar="DIR", help="also list wheels in DIR")
    pin.add_argument("--refresh", action="store_true", help="re-read the index listing instead of the cache")
    for action, run in ((show, cmd_xla_show), (pin, cmd_xla_pin)):
        action.add_argument("--workspace", default="WORKSPACE", metavar="FILE", help="default: WORKSPACE")
        action.add_argument("--family", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        action.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
        action.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (UsageError, ConfigError, policy.VersionError, doctor.InterpreterError, IndexClientError, WheelError,
            compat.CompatError, MatrixError, PythonNotFound, EnvError, BuildError, xla.PinError,
            gatereport.MinimumNotFound, *release_commands.ERRORS) as error:
        verb = f"release {args.action}" if args.verb == "release" else args.verb
        print(f"jaxrel {verb}: error: {redact(str(error))}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
