"""The ``jaxrel`` command: each verb is thin over the modules that do the work.

Exit codes: 0 compatible / success, 1 incompatible, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from packaging.version import Version

from jaxrel import __version__, doctor, policy
from jaxrel.family import ConfigError, Family, resolve_family
from jaxrel.guard import canonical_name

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (UsageError, ConfigError, policy.VersionError, doctor.InterpreterError) as error:
        print(f"jaxrel {args.verb}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
