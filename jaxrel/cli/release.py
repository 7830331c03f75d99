"""``jaxrel release plan|check|bump|build|verify|attest|publish``: the release scripts CI runs (thin).

Exit codes as for every verb: 0 success, 1 the release is refused (a failed check or
verification, an attestation not matching its file, a publish jaxrel refuses), 2 bad input (a
manifest that cannot be read), 3 the index or a build failed (credentials rejected or missing, an
index not reached, no OIDC identity where trusted publishing or signing needs one).
"""

from __future__ import annotations

import argparse
import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import Version

from jaxrel import policy
from jaxrel._util.text import shorten, table
from jaxrel.cli._common import UsageError, emit, parse_date, python_path, say
from jaxrel.distributions.filenames import Slot, wheel_slots
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.distributions.pages import parse_time
from jaxrel.distributions.remote_metadata import MetadataReader
from jaxrel.errors import ExitCode
from jaxrel.family import resolve_family
from jaxrel.release import attest, audit, auth, builder, bump, check, collect, plan, publish, released, verify
from jaxrel.release.config import BUILTIN
from jaxrel.release.project import Project, open_project

HELP = "Release scripts: plan, check, bump, build, verify, attest, publish."


def _index(args: argparse.Namespace) -> Index:
    return Index.from_pip(args.index_url, refresh=True, progress=say)


def _as_of(args: argparse.Namespace, project: Project, version: str | None, index: Index) -> datetime.datetime | None:
    """``--as-of``: a date or time, ``now``, or by default the moment of the release HEAD is, with or without its
    tag (a historical release is judged by what the index held then, not by today's releases)."""
    given = getattr(args, "as_of", None)
    if given:
        return _parse_as_of(given)
    moment, why = released.judged_as_of(project, version or project.version_of(project.release.lead()), index)
    if moment is not None:
        say(f"release: {why}, {moment:%Y-%m-%dT%H:%M:%SZ} (--as-of now for today's)")
    return moment


def run_plan(args: argparse.Namespace) -> int:
    with open_project(Path(args.project), args.family) as project:
        index = _index(args)
        result = plan.make_plan(project, args.version, index, as_of=_as_of(args, project, args.version, index))
        emit(args, result.to_json(), plan.render(result))
    if result.index_error:  # the plan is printed, but what is on the index is unknown: the index failed
        raise IndexClientError(f"the plan is incomplete: {result.index_error}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    with open_project(Path(args.source), args.family) as project:
        index = _index(args)
        result = plan.make_plan(project, args.version, index, as_of=_as_of(args, project, args.version, index))
        checks = check.run_checks(project, result, index)
        emit(args, check.to_json(checks, result), check.render(checks, result))
    if result.index_error:  # the checks that need the index could not be made: the index failed
        raise IndexClientError(f"the checks are incomplete: {result.index_error}")
    return 1 if any(c.status == check.Status.FAIL for c in checks) else 0


def _day(text: str | None) -> datetime.date | None:
    return None if text is None else parse_date("--release-date", text)


def _pins(items: list[str]) -> dict[str, str]:
    pins = {}
    for item in items:
        name, separator, value = item.partition("=")
        if not separator or not name.strip() or not value:
            raise UsageError(f"--pin {shorten(item)!r}: expected NAME=VERSION (e.g. libtpu=0.0.44.*)")
        pins[name.strip()] = value
    return pins


def _parse_as_of(given: str) -> datetime.datetime | None:
    """``--as-of``: a date (its end, UTC), a time, or ``now`` (``None``)."""
    if given == "now":
        return None
    try:
        return parse_time(given if "T" in given else f"{given}T23:59:59Z")
    except ValueError:
        raise UsageError(f"--as-of {shorten(given)!r}: expected a date (2026-07-16), a time "
                         "(2026-07-16T20:00:00Z) or now") from None


def run_bump(args: argparse.Namespace) -> int:
    kind = "rc" if args.rc else "nightly" if args.nightly else "release"
    if kind == "release" and args.version is None and args.minimum_backend is None and not args.pin:
        raise bump.BumpError("give a VERSION, --rc, --nightly, --minimum-backend or --pin")
    with open_project(Path(args.project), args.family) as project:
        if project.sdist is not None:
            raise bump.BumpError("cannot bump an sdist; bump the checkout it was built from")
        if args.released == released.NOT_RELEASED and args.release_date:
            raise UsageError("--released none says the declared version was never released; --release-date says "
                             "when it was: give one")
        changes = bump.plan_bump(project, args.version, kind=kind, components=args.component or None,
                                 minimum_backend=args.minimum_backend, allow_older=args.allow_older,
                                 released_on=_day(args.release_date), pins=_pins(args.pin), index=_index(args),
                                 released_given=args.released,
                                 as_of=_parse_as_of(args.as_of) if args.as_of else None)
        if not args.dry_run:
            bump.apply(project, changes)
        verb = "would change" if args.dry_run else "changed"
        text = "\n".join([f"{verb} {len(changes.changes)} value(s):"]
                         + [f"  {c.file}:{c.key}  {c.old} → {c.new}" for c in changes.changes]
                         + ([changes.diff()] if args.dry_run and changes.diff() else []))
        emit(args, {"dry_run": args.dry_run, "changes": [vars(c) for c in changes.changes]}, text)
    return 0


def run_build(args: argparse.Namespace) -> int:
    with open_project(Path(args.project), args.family) as project:
        result = plan.make_plan(project, args.version, None)
        output = Path(args.output)
        manifest = builder.build_release(project, result, output, python=python_path(args.python, "--python"),
                                         progress=say, only=args.component or None)
        built = ", ".join(dict.fromkeys(a.distribution for a in manifest.artifacts))
        count = len(manifest.artifacts)
        text = "\n".join([f"built {built} {manifest.version} (family {manifest.family}) into {output}/ "
                          f"({count} file{'' if count == 1 else 's'}, manifest.json):"]
                         + [f"  {a.file}  {a.sha256[:16]}…  {a.size / 1024:.1f} KiB" for a in manifest.artifacts])
        emit(args, manifest.to_json(), text)
    return 0


def _previous_grid(index: Callable[[], Index]) -> Callable[[str, Version], tuple[str, set[Slot]] | None]:
    """The slots of the newest final release of a distribution before a version, as the index lists them (the
    index is made when first asked: collect asks in the background)."""
    def grid(distribution: str, version: Version) -> tuple[str, set[Slot]] | None:
        listing = index().listing(distribution)
        earlier = [v for v in listing.versions() if v < version and policy.is_final(v)]
        if not earlier:
            return None
        return f"{distribution} {earlier[-1]}", wheel_slots(f.filename for f in listing.files_for(earlier[-1]))
    return grid


def run_collect(args: argparse.Namespace) -> int:
    pythons = [p.strip() for item in args.pythons for p in item.split(",") if p.strip()]
    platforms = [p.strip() for item in args.platforms for p in item.split(",") if p.strip()]
    previous = None if args.no_previous else _previous_grid(
        lambda: Index.from_pip(args.index_url, refresh=True, progress=say))
    with open_project(Path(args.project), args.family) as project:
        result = collect.collect(project, [Path(d) for d in args.directories], Path(args.output).absolute(),
                                 version=args.version, pythons=pythons, platforms=platforms, progress=say,
                                 previous=previous, drop=[d.strip() for item in args.drop for d in item.split(",")])
    for note in result.notes:
        say(f"collect: note: {note}")
    manifest = result.manifest
    rows = [(a.file, a.distribution, a.role, f"{a.size / 1e6:.1f} MB") for a in manifest.artifacts]
    text = "\n".join([f"collected {manifest.family} {manifest.version} into {result.output}: {len(rows)} files, "
                      f"upload order {' → '.join(dict.fromkeys(a.distribution for a in manifest.artifacts))}",
                      table(("file", "distribution", "role", "size"), rows, indent="  ")])
    emit(args, {**manifest.to_json(), "output": str(result.output), "notes": result.notes}, text)
    return 0


def run_audit(args: argparse.Namespace) -> int:
    if args.version and args.since:
        raise UsageError("pass --version V or --since V, not both")
    for given, option in ((args.version, "--version"), (args.since, "--since")):
        if given is not None:
            policy.parse_version(given, option)  # a word (latest, head) is refused before the index is asked
    if args.family in BUILTIN:  # a built-in profile needs no tree: the index is what is audited
        family, release_config = resolve_family(args.family), BUILTIN[args.family]()
    else:
        with open_project(Path(args.project), args.family) as project:
            family, release_config = project.family, project.release
    index = _index(args)
    reader = MetadataReader(limits=index.limits, cafile=index.cafile)
    results = audit.audit(family, release_config, index, audit.releases(index, family, args.version, args.since),
                          reader=reader, progress=say)
    requests = reader.requests + index.requests  # METADATA reads and listing pages
    emit(args, {**audit.to_json(results), "requests": requests}, audit.render(results, release_config, requests))
    return 1 if any(r.findings for r in results) else 0


def run_verify(args: argparse.Namespace) -> int:
    if not Path(args.dist).is_dir():
        raise UsageError(f"{args.dist}: no such directory; pass the output of `jaxrel release build` (default dist)")
    with open_project(Path(args.project), args.family) as project:
        result = verify.verify_dist(Path(args.dist), project.family, release=project.release, deep=args.deep)
    emit(args, result.to_json(), verify.render(result, Path(args.dist)))
    return 0 if result.ok else 1


def run_attest(args: argparse.Namespace) -> int:
    if not Path(args.dist).is_dir():
        raise UsageError(f"{args.dist}: no such directory; pass the output of `jaxrel release build` (default dist)")
    with open_project(Path(args.project), args.family) as project:
        verification = verify.verify_dist(Path(args.dist), project.family, release=project.release)
    if not verification.ok:
        emit(args, {"ok": False, "attested": [], "verification": verification.to_json()},
             verify.render(verification, Path(args.dist)) + "\nnothing attested: fix the release first")
        return 1
    files = [a.file for a in verification.manifest.artifacts]
    written = attest.sign(Path(args.dist), files)
    emit(args, {"ok": True, "attested": written, "already": len(files) - len(written)},
         "\n".join([f"attested {len(written)} files ({len(files) - len(written)} already attested):"]
                   + [f"  {name}" for name in written]))
    return 0


def run_publish(args: argparse.Namespace) -> int:
    if args.repository is None and args.repository_url is None and args.dry_run:
        repository = publish.Repository(None, None, "")  # a dry run without an index: everything would upload
    else:
        repository = publish.resolve_repository(args.repository, args.repository_url, args.index_url)
    how = auth.choose(os.environ, trusted_publishing=args.trusted_publishing)
    target = auth.upload_url(repository.name, repository.url, str(publish.pypirc_path())) \
        if how.method is auth.Method.TRUSTED_PUBLISHING else None
    credentials = auth.Credentials(how, target, os.environ)
    with open_project(Path(args.project), args.family) as project:
        verification, result = publish.publish(Path(args.dist), project.family, repository, dry_run=args.dry_run,
                                               progress=say, credentials=credentials, attest_first=args.attest,
                                               release=project.release)
    if not verification.ok and not args.json:  # what failed, then the publish report: one report on stdout
        print(verify.render(verification, Path(args.dist)))
    emit(args, result.to_json(), publish.render(result))
    if result.exit_code == ExitCode.ENVIRONMENT:  # the index failed: one line on stderr, as for every exit 3
        say(f"jaxrel release publish: error: {result.error}")
    return int(result.exit_code)


def add(verbs: Any) -> None:
    """Add ``release`` and its actions to the ``jaxrel`` parser's sub-commands."""
    release = verbs.add_parser("release", help=HELP,
                               description="Release scripts CI runs, in order: check, build, verify, publish.")
    actions = release.add_subparsers(dest="action", required=True)

    def action(name: str, help: str, run: Any, project: bool = True) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=help, description=help)
        if project:
            sub.add_argument("--project", default=".", metavar="DIR", help="the project root (default: .)")
        sub.add_argument("--family", default=None, metavar="NAME|PYPROJECT",
                         help="a built-in profile (jax) or a pyproject.toml (default: the project's [tool.jaxrel])")
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        sub.set_defaults(run=run)
        return sub

    def index_option(sub: argparse.ArgumentParser, as_of: bool = False) -> None:
        sub.add_argument("--index-url", metavar="URL", help="list releases on this index only (default: pip's)")
        if as_of:
            sub.add_argument("--as-of", metavar="DATE|TIME|now",
                             help="judge the index as it was then, by its upload times (default: the release tag's "
                                  "date when HEAD is the tag, else now)")

    sub = action("plan", "What a release at VERSION contains, the rules that apply, what is built and uploaded.",
                 run_plan)
    sub.add_argument("--version", metavar="V", help="the release version (default: the frontend's declared one)")
    index_option(sub, as_of=True)

    sub = action("check", "Pre-flight: refuse a bad release (each failure one line with its fix).", run_check,
                 project=False)
    sub.add_argument("source", nargs="?", default=".", metavar="DIR|SDIST",
                     help="the project root, or a .tar.gz sdist (default: .)")
    sub.add_argument("--version", metavar="V", help="the release version (default: the frontend's declared one)")
    index_option(sub, as_of=True)

    sub = action("bump", "Move versions in every declared file at once (release, --rc, --nightly).", run_bump)
    sub.add_argument("version", nargs="?", metavar="VERSION", help="the new version, or the base for --rc/--nightly")
    kind = sub.add_mutually_exclusive_group()
    kind.add_argument("--rc", action="store_true", help="the next release candidate: X.Y.ZrcN")
    kind.add_argument("--nightly", action="store_true", help="X.Y.Z.devYYYYMMDD from the last commit's UTC date")
    sub.add_argument("--component", action="append", metavar="NAME",
                     help="only this component (distribution or role; repeatable; default: all)")
    sub.add_argument("--minimum-backend", metavar="M", help="move the frontend's minimum backend (and its range)")
    sub.add_argument("--allow-older", action="store_true", help="allow moving a version backwards")
    sub.add_argument("--release-date", metavar="YYYY-MM-DD",
                     help="the date a post-release bump writes into the released version's changelog heading "
                          "(default: today, UTC)")
    sub.add_argument("--pin", action="append", default=[], metavar="NAME=V",
                     help="move a component on its own numbering to V (jax: --pin libtpu=0.0.44.*); repeatable")
    sub.add_argument("--released", metavar="V|none",
                     help="the declared version V was released (or 'none': it was not, it is renumbered); default: "
                          "asked of the index and the release tags, which must agree")
    sub.add_argument("--index-url", metavar="URL", help="the index asked whether the declared version was released "
                                                        "(default: pip's)")
    sub.add_argument("--as-of", metavar="DATE|TIME|now", help="ask the index as it was then (default: now)")
    sub.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")

    sub = action("build", "Build every component of the release into one directory with manifest.json.", run_build)
    sub.add_argument("--version", metavar="V", help="the release version (default: the frontend's declared one)")
    sub.add_argument("--output", default="dist", metavar="DIR", help="an empty or new directory (default: dist)")
    sub.add_argument("--python", metavar="3.N|PATH",
                     help="the interpreter Bazel builds compiled wheels for: a version, a path or a command")
    sub.add_argument("--component", action="append", metavar="NAME",
                     help="build only this component (repeatable): a build-matrix job's share, gathered by "
                          "`release collect`")

    sub = action("audit", "What the index serves for each release of the family: components, extras that cannot be "
                 "installed, wheel sets that differ, late or yanked files, Requires-Python gaps, pins.", run_audit)
    sub.add_argument("--version", metavar="V", help="one release (default: the newest)")
    sub.add_argument("--since", metavar="V", help="every final release from V on")
    index_option(sub)

    sub = action("collect", "Gather the wheels and sdists a build matrix made (CI artifacts) into one release "
                 "directory with manifest.json, after checking they are one family release.", run_collect)
    sub.add_argument("directories", nargs="+", metavar="DIR", help="directories holding the build jobs' files")
    sub.add_argument("--output", required=True, metavar="OUT", help="a new or empty directory")
    sub.add_argument("--version", metavar="V", help="the release version (default: the tree's declared one)")
    sub.add_argument("--pythons", action="append", default=[], metavar="TAGS",
                     help="Python tags the backend must have wheels for (cp312,cp313); repeatable")
    sub.add_argument("--platforms", action="append", default=[], metavar="TAGS",
                     help="platform tags the backend must have wheels for (manylinux_2_27_x86_64); repeatable")
    sub.add_argument("--drop", action="append", default=[], metavar="WHAT",
                     help="an interpreter (cp311, cp313t) or platform (win_amd64, manylinux_aarch64) the previous "
                          "release had and this one drops on purpose; repeatable")
    sub.add_argument("--no-previous", action="store_true",
                     help="do not compare the backend's grid with the previous release's on the index")
    index_option(sub)

    sub = action("verify", "Verify built artifacts: manifest hashes, RECORD, twine check, names, policy pins.",
                 run_verify)
    sub.add_argument("dist", nargs="?", default="dist", metavar="DIR", help="default: dist")
    sub.add_argument("--deep", action="store_true",
                     help="check every wheel's members against RECORD, also where collect checked these bytes")

    sub = action("attest", "Verify, then sign each file into <file>.publish.attestation (PEP 740; Sigstore, "
                 "the job's OIDC identity).", run_attest)
    sub.add_argument("dist", nargs="?", default="dist", metavar="DIR", help="default: dist")

    sub = action("publish", "Verify, then upload what the index lacks, backend first; resumable.", run_publish)
    sub.add_argument("dist", nargs="?", default="dist", metavar="DIR", help="default: dist")
    target = sub.add_mutually_exclusive_group()
    target.add_argument("--repository", metavar="NAME", help="a repository named in ~/.pypirc (or pypi)")
    target.add_argument("--repository-url", metavar="URL", help="an upload URL")
    index_option(sub)
    sub.add_argument("--dry-run", action="store_true", help="show exactly what would be uploaded; upload nothing")
    sub.add_argument("--trusted-publishing", action="store_true",
                     help="authenticate only with the job's OIDC identity (exit 3 without one); by default it is "
                          "used when the environment has an identity and no TWINE_PASSWORD")
    sub.add_argument("--attest", action="store_true",
                     help="first attest each file lacking one (as `jaxrel release attest`); uploads attach them")
