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
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    env = installed.read_environment(family, args.python)
    result = doctor.diagnose(family, env)
    emit(args, doctor.to_json(family, env, result), doctor.render(family, env, result))
    return 0 if result.compatible else 1
