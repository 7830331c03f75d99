"""``jaxrel doctor``: inspect an environment's frontend, backend and plugins without importing the backend."""

from __future__ import annotations

import argparse
from typing import Any

from jaxrel import doctor
from jaxrel.cli._common import add_common, emit
from jaxrel.distributions import installed
from jaxrel.family import resolve_family

HELP = "Inspect an environment's frontend, backend and plugins without importing the backend."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("doctor", help=HELP, description=HELP))
    sub.add_argument("--python", metavar="PATH", help="interpreter of the environment to inspect (default: this one)")
    sub.add_argument("--history", metavar="FILE|URL", help="add what a history store or published HUD knows of the "
                     "installed set (one evidence line; the verdict stays the rules')")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    env = installed.read_environment(family, args.python)
    result = doctor.diagnose(family, env)
    data, text = doctor.to_json(family, env, result), doctor.render(family, env, result)
    if args.history:
        from packaging.utils import canonicalize_name

        from jaxrel.history.evidence import evidence_line  # the history layer, only when asked for

        found = [d for d in (env.frontend, env.backend, *env.plugins) if d is not None]
        python = ".".join(env.python_version.split(".")[:2])
        line = evidence_line(args.history, {str(canonicalize_name(d.name)): d.version for d in found}, python)
        data["history"] = line.removeprefix("history: ")
        text += f"\n{line}"
    emit(args, data, text)
    return 0 if result.compatible else 1
