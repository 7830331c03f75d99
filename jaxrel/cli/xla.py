"""``jaxrel xla show|pin``: show or move the XLA pin in a Bazel WORKSPACE."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from jaxrel import policy
from jaxrel._util.text import table
from jaxrel.cli._common import add_common, emit, index_options, say
from jaxrel.distributions.index import Index
from jaxrel.distributions.pythons import supported_tags
from jaxrel.extension import xla
from jaxrel.family import resolve_family

HELP = "Show or move the XLA pin in WORKSPACE."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("xla", help=HELP, description=HELP))
    actions = sub.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the pin and what it means for extensions")
    pin = actions.add_parser("pin", help="re-pin to the wheel of a backend release (file name, sha256, commit)")
    pin.add_argument("--jaxlib", "--backend-version", dest="version", required=True, metavar="X",
                     help="the backend release to take the FFI headers from")
    pin.add_argument("--commit", metavar="SHA", help="the XLA commit X was built from (default: the known one)")
    index_options(pin)
    for action, run in ((show, run_show), (pin, run_pin)):
        action.add_argument("--workspace", default="WORKSPACE", metavar="FILE", help="default: WORKSPACE")
        action.add_argument("--family", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        action.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
        action.set_defaults(run=run)


def run_show(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    pin = xla.read_pin(Path(args.workspace))
    facts = xla.pin_facts(family.name, pin)
    rows = [("XLA commit", pin.commit), ("backend", f"{pin.backend} {pin.backend_version}"),
            ("headers from", pin.wheel), ("sha256", pin.sha256),
            ("XLA FFI API", facts["xla_ffi_api"] or "unknown (not in the release data)"),
            ("extensions require", f"{pin.backend}>={facts['minimum_backend']}" if facts["minimum_backend"]
             else "unknown")]
    text = f"XLA pin in {args.workspace}:\n" + table(None, rows, indent="  ")
    emit(args, {**pin.to_json(), **facts, "workspace": args.workspace}, text)
    return 0


def run_pin(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    workspace = Path(args.workspace)
    current = xla.read_pin(workspace)
    policy.parse_version(args.version, f"--{family.backend.distribution}")
    index = Index.from_pip(args.index_url, args.wheelhouse, refresh=args.refresh, progress=say)
    listing = index.listing(current.backend)
    python = ".".join(str(part) for part in sys.version_info[:2])
    pin = xla.pin_for(family.name, current.backend, args.version, listing, supported_tags(python), args.commit)
    changed = xla.write_pin(workspace, pin)
    verb = "pinned" if changed else "already pinned"
    text = f"{verb}: XLA {pin.commit} via {pin.wheel} (sha256 {pin.sha256[:16]}...) in {workspace}"
    emit(args, {**pin.to_json(), **xla.pin_facts(family.name, pin), "changed": changed}, text)
    return 0
