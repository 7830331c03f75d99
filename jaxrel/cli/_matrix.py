"""What ``matrix`` and ``compat`` share: their options and the family, index, frontend and matrix they build."""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from jaxrel import policy
from jaxrel._util import workdirs
from jaxrel.cells import frontend as frontends
from jaxrel.cells.hardware import device_for, devices_here
from jaxrel.cells.matrix import BackendFilter, Matrix, known_plugin_sets
from jaxrel.cells.planning import matrix_for
from jaxrel.cli._common import UsageError, index_options, say
from jaxrel.distributions import sources
from jaxrel.distributions.index import Index
from jaxrel.distributions.pages import parse_time
from jaxrel.distributions.pythons import find_pythons
from jaxrel.family import Family, resolve_family


@dataclass
class MatrixInputs:
    family: Family
    index: Index
    frontend: frontends.PreparedFrontend
    matrix: Matrix


def add_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--frontend", metavar="NAME==V", help="a released frontend (default: the newest release's "
                     "sdist, built from source as the HEAD stand-in)")
    sub.add_argument("--frontend-src", metavar="PATH", help="a frontend source tree (e.g. a jax git checkout); "
                     "exported and built out of tree, nothing is written into it")
    sub.add_argument("--ref", metavar="REV", help="with --frontend-src (a git checkout): this revision instead of "
                     "the working tree")
    sub.add_argument("--python", action="append", default=[], metavar="3.N[,3.M]",
                     help="interpreters for the cells (default: the oldest one here that the frontend supports)")
    sub.add_argument("--backends", metavar="SPEC", help="only these backend releases: >=0.11.2 or 0.12.0,0.11.2")
    sub.add_argument("--plugins", default=None, metavar="all|none|SET[,SET]",
                     help="hardware plugin families to add, as the frontend's extras declare them "
                          "(cuda12, cuda13, cuda12-local, cuda13-local, rocm7, oneapi, tpu for jax 0.12); default: "
                          "all, the -local flavours only where their device is (an NVIDIA GPU)")
    sub.add_argument("--plugins-on", choices=("newest", "all"), default="newest",
                     help="add plugin sets to the newest admitted backend only (default) or to every one")
    sub.add_argument("--as-of", metavar="DATE|TIME", help="the matrix as the index stood then: backend and plugin "
                     "releases uploaded later are left out, and the cells' requirements are resolved as of then "
                     "(uv's --exclude-newer); a date means its end (23:59:59 UTC)")
    index_options(sub)
    sub.add_argument("--workdir", default="build/compat", metavar="DIR", help="downloads, envs, reports")


def as_of(text: str | None) -> datetime.datetime | None:
    """``--as-of``: an aware UTC time (read as the index's upload times are); a bare date is that day's last
    second."""
    if text is None:
        return None
    try:
        return parse_time(f"{text}T23:59:59Z" if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else text)
    except ValueError:
        raise UsageError(f"--as-of {text[:40]!r}: expected a date (2026-07-01) or a time (2026-07-01T12:00:00Z)") \
            from None


def exclude_newer(moment: datetime.datetime | None) -> str | None:
    """The time as uv's ``--exclude-newer`` takes it."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


def backend_filter(text: str | None) -> BackendFilter | None:
    """``--backends``: a specifier (``>=0.11.2``) or comma-separated versions (``0.12.0,0.11.2``)."""
    if not text:
        return None
    found = policy.versions_or_specifier(text, "--backends", ">=0.11.2")
    return set(found) if isinstance(found, list) else found


def plugin_sets(known: Sequence[str], text: str | None, family: str = "",
                default: Sequence[str] | None = None) -> list[str]:
    """``--plugins``: ``all`` (every family the frontend's extras declare), ``none``, or names; not given:
    ``default`` (else all)."""
    if text is None and default is not None:
        return list(default)
    if text is None or text.strip() == "all":
        return list(known)
    if text.strip() in ("", "none"):
        return []
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"--plugins: no plugin family {', '.join(unknown)} in {family or 'the frontend'}'s extras "
                         f"(known: {', '.join(known) or 'none'}; or 'all', 'none')")
    return names


def check_sources(args: argparse.Namespace) -> None:
    """Where the frontend comes from: one of --frontend and --frontend-src; --ref only with --frontend-src."""
    if args.frontend and args.frontend_src:
        raise UsageError("pass --frontend NAME==V or --frontend-src PATH, not both")
    if args.ref and not args.frontend_src:
        raise UsageError(f"--ref {args.ref}: pass --frontend-src PATH (the git checkout) too")


def _sources(source: Path | None) -> list[tuple[str, Path]]:
    """The frontend's checkout (its top and its git directory): no work directory lies in or around them."""
    if source is None:
        return []
    tops = [("the frontend checkout", sources.git_toplevel(source) or source)]
    found = sources.git_dir(source)
    return tops + ([("its git directory", found)] if found is not None else [])


def inputs(args: argparse.Namespace, *, build: bool) -> MatrixInputs:
    """The family, index, frontend and matrix of one ``matrix``/``compat`` invocation."""
    check_sources(args)
    family = resolve_family(args.family)
    as_of(args.as_of)
    backends = backend_filter(args.backends)  # bad options are reported before the index is asked
    with ThreadPoolExecutor(1) as early:  # the interpreters are probed while pip is asked for its index
        found = early.submit(find_pythons)
        index = Index.from_pip(args.index_url, args.wheelhouse, refresh=args.refresh, progress=say)
        found.result()
    source = Path(args.frontend_src).resolve() if args.frontend_src else None
    workdir = workdirs.claim(Path(args.workdir), keep_out=_sources(source))
    front = frontends.prepare_frontend(
        family, index, workdir, source=source,
        requirement=args.frontend, build=build or bool(args.frontend_src), ref=args.ref,
    )
    pythons = [p.strip() for item in args.python for p in item.split(",") if p.strip()]
    spec = front.spec
    known = known_plugin_sets(family, spec)
    # a -local flavour installs like its family's light cell where its device is not: a cell of its own only there
    here = devices_here()
    away = [name for name, found in known.items() if found.local and device_for(found.distributions) not in here]
    sets = plugin_sets(list(known), args.plugins, f"{spec.name} {spec.version}",
                       default=[name for name in known if name not in away])
    matrix = matrix_for(family, index, front.spec, pythons=pythons, backends=backends,
                        plugin_sets=sets, plugins_on=args.plugins_on, as_of=as_of(args.as_of))
    matrix.notes += [f"plugin set {name}: not run by default without its device here (its install, the plugins "
                     f"alone on the system's libraries, is the {name.removesuffix('-local')} cell's light one); "
                     f"--plugins {name} runs it" for name in away if args.plugins is None]
    if args.as_of:
        matrix.notes.append(f"as of {exclude_newer(as_of(args.as_of))}: releases uploaded later are left out")
    if getattr(args, "cell", None):
        matrix = matrix.select(args.cell)
    return MatrixInputs(family, index, front, matrix)
