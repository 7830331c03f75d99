"""``jaxrel verdict``: judge a set of pins (exit 0 compatible, 1 incompatible, 2 bad input)."""

from __future__ import annotations

import argparse
from typing import Any

from packaging.version import Version

from jaxrel import policy
from jaxrel.cli._common import add_common, emit, parse_pin
from jaxrel.family import resolve_family

HELP = "Judge a set of pins: exit 0 compatible, 1 incompatible, 2 bad input."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("verdict", help=HELP, description=HELP))
    sub.add_argument("pins", nargs="+", metavar="NAME==VERSION", help="e.g. jax==0.12.0 jaxlib==0.12.0.1")
    sub.add_argument("--min-backend", metavar="M", help="the frontend's minimum backend (default: from release data)")
    sub.add_argument("--history", metavar="FILE|URL", help="add what a history store or published HUD knows of this "
                     "set (one evidence line; the verdict stays the rules')")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    pins = family.sort_pins([parse_pin(text) for text in args.pins])
    minimum: Version | None
    if args.min_backend is not None:
        minimum, source = policy.parse_version(args.min_backend, "--min-backend"), "--min-backend"
    else:
        minimum = family.declared_minimum(pins.frontend)
        source = f"declared by {pins.frontend}" if minimum else "unknown (pass --min-backend)"
    result = policy.verdict(backend=pins.backend, frontend=pins.frontend, minimum_backend=minimum,
                            plugins=pins.plugins, exempt_plugins=family.unpinned(p.name for p in pins.plugins),
                            released_backends=family.released_backends(),
                            runtime_pins=family.runtime_pins(pins.frontend))
    roles = {"frontend": pins.frontend, "backend": pins.backend}
    data: dict[str, Any] = {**result.to_json(), "family": family.name,
                            "pins": {role: pin and {"name": pin.name, "version": str(pin.version)}
                                     for role, pin in roles.items()},
                            "plugins": [{"name": p.name, "version": str(p.version)} for p in pins.plugins],
                            "minimum_backend": minimum and str(minimum), "minimum_source": source}
    listed = ", ".join(str(p) for p in (pins.frontend, pins.backend, *pins.plugins) if p)
    lines = [f"{listed}: {'compatible' if result.compatible else 'INCOMPATIBLE'}",
             f"  minimum {family.backend.distribution}: {minimum or 'unknown'} ({source})"]
    lines += [f"  x {v.rule}: {v.message}" for v in result.violations]
    lines += [f"  ! {w.rule}: {w.message} ({w.fix})" for w in result.warnings]
    lines += [f"  - {rule}: not checked ({reason})" for rule, reason in result.skipped.items()]
    if args.history:
        from jaxrel.history.evidence import evidence_line  # the history layer, only when asked for

        line = evidence_line(args.history, {p.name: str(p.version) for p in (pins.frontend, pins.backend,
                                                                              *pins.plugins) if p})
        data["history"] = line.removeprefix("history: ")
        lines.append(f"  {line}")
    if result.fix:
        lines += [f"fix: {result.fix}", *(f" or: {alternative}" for alternative in result.alternatives)]
    emit(args, data, "\n".join(lines))
    return 0 if result.compatible else 1
