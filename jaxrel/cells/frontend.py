"""The frontend every cell installs: built out of tree from a source tree or a released sdist, or downloaded.

A source tree (``--frontend-src``, at ``--ref``) is exported into ``WORKDIR/frontend/src``
first (:mod:`jaxrel.distributions.sources`) and built there: nothing is written into the user's tree,
and nothing a former build left there reaches the wheel. A wheel is reused only when the
exported files are byte for byte those it was built from (:func:`cached_build`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from jaxrel import policy
from jaxrel._util import files, localfiles, tarballs
from jaxrel.cells.matrix import FrontendSpec
from jaxrel.distributions import envs, sources
from jaxrel.distributions.index import Index
from jaxrel.distributions.pipconfig import PipIndexConfig
from jaxrel.distributions.pythons import PythonNotFound, find_pythons, python_for
from jaxrel.distributions.wheels import ArtifactInfo, inspect
from jaxrel.errors import BadInput, JaxrelError
from jaxrel.family import Family

__all__ = ["CompatError", "KEEP_BUILT", "PreparedFrontend", "build_python", "build_wheel", "cached_build",
    "declared_requires_python", "frontend_spec", "prepare_frontend"]


class CompatError(BadInput):
    """The run cannot start: no frontend, no interpreter, no suite."""


@dataclass
class PreparedFrontend:
    """The frontend every cell installs: a wheel built or downloaded once per run."""

    spec: FrontendSpec
    wheel: Path | None  # None until built (an sdist inspected for the matrix only)
    info: ArtifactInfo
    source_tree: Path | None = None  # the exported (or unpacked) tree it was built from; the own tests come from it
    build_seconds: float = 0.0  # exporting and building it
    commit: str | None = None  # the git commit a source tree was at (with ``dirty``: plus working-tree changes)
    dirty: bool = False


def declared_requires_python(source: Path) -> SpecifierSet | None:
    """The Python versions a source tree declares it needs: ``[project] requires-python`` in its
    pyproject.toml, else a literal ``python_requires=`` in its setup.py (jax's); ``None`` when neither."""
    pyproject = source / "pyproject.toml"
    texts: list[str] = []
    if pyproject.is_file():
        try:
            project = localfiles.load_toml(pyproject).get("project")
        except BadInput:  # a pyproject the build itself will refuse, with its own message
            project = None
        declared = project.get("requires-python") if isinstance(project, dict) else None
        if isinstance(declared, str):
            texts.append(declared)
    setup = source / "setup.py"
    if not texts and setup.is_file():
        text = setup.read_text(encoding="utf-8", errors="replace")
        found = re.search(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]", text)
        texts += [found.group(1)] if found else []
    try:
        return SpecifierSet(texts[0]) if texts else None
    except InvalidSpecifier:
        return None


def build_python(source: Path) -> str:
    """The interpreter to build ``source`` with: the oldest one here its requires-python admits (the
    running one when it admits it or declares nothing). A tree needing a newer Python than jaxrel's
    (jax HEAD: >= 3.12) builds with that one instead of failing in its setup.py."""
    required = declared_requires_python(source)
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if required is None or required.contains(f"{running}.0", prereleases=True):
        return sys.executable
    oldest = next((f"3.{minor}" for minor in range(100)
                   if required.contains(f"3.{minor}.0", prereleases=True)), None)
    if oldest is not None:  # when it is here, it is the answer: one ``uv python find``, not a probe of every one
        try:
            return python_for(oldest).executable
        except PythonNotFound:
            pass
    for version, python in find_pythons().items():
        if required.contains(f"{version}.0", prereleases=True):
            return python.executable
    raise CompatError(f"{source}: requires Python {required}; no such interpreter here "
                      f"(found: {', '.join(find_pythons()) or 'none'}); install one (e.g. pyenv install 3.12)")


def build_wheel(source: Path, out: Path, python: str | None = None, index: PipIndexConfig | None = None,
                build_env: envs.Env | None = None, *, git: bool = True) -> Path:
    """Build a wheel from a source tree (``uv build``, else ``pip wheel``) into ``out`` with ``python``
    (default: :func:`build_python`, an interpreter the tree's requires-python admits); returns it. The build
    backend comes from ``index`` (default: pip's configuration), or from ``build_env``: an environment holding
    exactly the tree's build requirements (:func:`build_requirements`), used as it is instead of a fresh isolated
    one per build (uv's ``--no-build-isolation``). ``git=False``: the tree is no checkout's (an unpacked sdist),
    and git in the build finds no repository around it (``GIT_CEILING_DIRECTORIES``) rather than the one the work
    directory happens to lie in."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    python = python or build_python(source)
    uv = envs.find_uv()
    if uv and build_env is not None:
        command = [uv, "build", "--wheel", "--quiet", "--no-build-isolation", "--python", str(build_env.python),
                   "--out-dir", str(out), str(source)]
    elif uv:
        command = [uv, "build", "--wheel", "--quiet", "--python", python, "--out-dir", str(out), str(source)]
    else:
        command = [python, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                   *(index.pip_arguments() if index is not None else []), str(source)]
    environment = envs.uv_environment(index)
    if not git:
        environment["GIT_CEILING_DIRECTORIES"] = str(source.resolve().parent)
    envs.run_step(command, environment, f"building a wheel of {source}")
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise CompatError(f"building {source} gave {len(wheels)} wheels in {out}; expected one")
    return wheels[0]


def build_requirements(pyproject: str) -> list[str] | None:
    """A ``pyproject.toml``'s ``[build-system] requires`` (PEP 518), or ``None`` when it declares none or cannot be
    read (its build then runs isolated, as every frontend does by default)."""
    try:
        build_system = localfiles.loads_toml(pyproject, "pyproject.toml").get("build-system", {})
    except BadInput:
        return None
    requires = build_system.get("requires") if isinstance(build_system, dict) else None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        return None
    return list(requires)


KEEP_BUILT = 4  # frontend wheels kept in WORKDIR/frontend/wheels, the newest first


def cached_build(tree: Path, workdir: Path, index: PipIndexConfig | None = None,
                 digest: str | None = None, *, git: bool = True) -> tuple[Path, bool]:
    """The wheel of ``tree``: the one built earlier from exactly these files, at the same commit (a build may put
    its hash, date or nearest tag into the version) with the same interpreter, else a
    fresh build (kept under ``WORKDIR/frontend/wheels/<digest>``, the newest :data:`KEEP_BUILT`). Returns it
    and whether it was reused. ``git=False`` (an unpacked sdist): no commit, and the build sees none
    (:func:`build_wheel`), so a commit in a checkout that holds the work directory rebuilds nothing.

    Reusing the very file keeps uv's unpacked copy, so the bytecode the cells compiled from it stays valid.
    """
    python = build_python(tree)
    interpreter = Path(python).resolve()  # its file's identity changes when it is upgraded in place
    digest = digest if digest is not None else files.tree_digest(tree, skip={".git"})
    identity = (f"{digest} {sources.git_identity(tree) if git else ''} "
                f"{interpreter} {interpreter.stat().st_mtime_ns} {interpreter.stat().st_size}")
    key = hashlib.sha256(identity.encode()).hexdigest()[:32]
    store = workdir / "frontend" / "wheels"
    home = store / key
    found = sorted(home.glob("*.whl")) if home.is_dir() else []
    if len(found) == 1:
        os.utime(home)  # the newest use, for pruning
        return found[0], True
    staging = store / f"{key}.partial"
    try:
        wheel = build_wheel(tree, staging, python=python, index=index, git=git)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if home.exists():
        shutil.rmtree(home)
    staging.rename(home)
    for old in sorted((p for p in store.iterdir() if p.is_dir() and not p.name.endswith(".partial")),
                      key=lambda p: p.stat().st_mtime, reverse=True)[KEEP_BUILT:]:
        shutil.rmtree(old, ignore_errors=True)
    return home / wheel.name, False


def _unpack_sdist(sdist: Path, into: Path) -> tuple[Path, str]:
    """``sdist``'s one top-level directory, unpacked into ``into``, and its digest (:func:`files.tree_digest`
    without ``.git``, as :func:`cached_build` keys it); the tree unpacked there by an earlier run is kept when it
    came from the same file and its files are still the ones unpacked (the digest, recorded beside it)."""
    stamp = into.with_name(into.name + ".unpacked")
    identity = files.sha256_of(sdist)
    tops = [p for p in into.iterdir() if p.is_dir()] if into.is_dir() else []
    try:
        recorded = localfiles.read_text(stamp).split()
    except JaxrelError:
        recorded = []
    if len(tops) == 1 and recorded == [identity, digest := files.tree_digest(tops[0], skip={".git"})]:
        return tops[0], digest
    stamp.unlink(missing_ok=True)
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        tarballs.extract_all(archive, into)
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise CompatError(f"{sdist.name}: expected one top-level directory, found {len(tops)}")
    digest = files.tree_digest(tops[0], skip={".git"})
    stamp.write_text(f"{identity} {digest}\n", encoding="utf-8")
    return tops[0], digest


def frontend_spec(family: Family, info: ArtifactInfo, source: str) -> FrontendSpec:
    """The frontend as its built or released metadata declares it."""
    declared = info.requirements_on(family.backend.distribution)
    minimum = info.minimum_backend
    if minimum is None and declared is not None:
        lower = [s.version for s in declared if s.operator in (">=", "==")]
        minimum = lower[0] if lower else None
    if minimum is None:
        raise CompatError(
            f"{info.filename}: declares no minimum {family.backend.distribution} (no "
            f"{family.frontend.minimum_backend_variable} in {family.frontend.version_file}, no Requires-Dist bound); "
            "set minimum-backend in [tool.jaxrel.frontend]"
        )
    policy.parse_version(minimum, f"minimum {family.backend.distribution} declared by {info.filename}")
    return FrontendSpec(info.name, info.version, minimum, source,
                        str(declared) if declared is not None else None, info.requires_python,
                        tuple(info.requires_dist))


def prepare_frontend(
    family: Family, index: Index, workdir: Path, *, source: Path | None = None, requirement: str | None = None,
    build: bool = True, ref: str | None = None,
) -> PreparedFrontend:
    """Build (source tree at ``ref``, or the newest release's sdist by default) or download (``NAME==V``) the frontend.

    With ``build=False`` a released sdist is only inspected (enough to build the matrix).
    """
    name = family.frontend.distribution
    if ref is not None and source is None:
        raise CompatError(f"--ref {ref}: a revision of what? pass --frontend-src PATH (a git checkout) too")
    if source is not None:
        if not (source / family.frontend.version_file).exists():
            raise CompatError(f"{source}: no {family.frontend.version_file}; --frontend-src must be a "
                              f"{name} source tree (a git checkout or an unpacked sdist)")
        start = time.perf_counter()
        tree, exported = sources.export(source, workdir / "frontend" / "src", ref, skip=workdir)
        if not (tree / family.frontend.version_file).exists():
            raise CompatError(f"{source} at {ref}: no {family.frontend.version_file} in that revision")
        wheel, reused = cached_build(tree, workdir, index.pip_config())
        info = inspect(wheel, family, use_cache=False)
        label = (f"source {source}" + (f" at {ref}" if ref else "")
                 + f" ({exported}, {'its wheel built earlier from the same files' if reused else 'built out of tree'})")
        commit, dirty = sources.commit_of(source, ref)
        return PreparedFrontend(frontend_spec(family, info, label), wheel, info, tree, time.perf_counter() - start,
                                commit, dirty)
    listing = index.listing(name)
    if requirement is not None:
        wanted_name, _, version = requirement.partition("==")
        if canonicalize_name(wanted_name) != canonicalize_name(name) or not version:
            raise CompatError(f"--frontend {requirement!r}: expected {name}==VERSION")
        policy.parse_version(version, f"--frontend {name} version")
        files = listing.files_for(version)
        if not files:
            raise CompatError(f"{name} {version} is not on the index ({', '.join(index.describe())}); "
                              f"newest: {listing.versions()[-1] if listing.versions() else 'none'}")
        wheel_file = next((f for f in files if f.is_wheel and f.yanked is None and "py3-none-any" in f.filename), None)
        if wheel_file is not None:
            wheel = index.download(wheel_file)
            info = inspect(wheel, family, sha256=wheel_file.sha256)
            return PreparedFrontend(frontend_spec(family, info, f"wheel {wheel.name}"), wheel, info)
        sdist_file = listing.sdist(version)
        if sdist_file is None:
            raise CompatError(f"{name} {version} has neither a pure wheel nor an sdist on the index")
        label = f"sdist {sdist_file.filename}"
    else:
        finals = [v for v in listing.versions() if policy.is_final(v) and listing.sdist(v)]
        if not finals:
            raise CompatError(f"no {name} release with an sdist on {', '.join(index.describe())}")
        sdist_file = listing.sdist(finals[-1])
        assert sdist_file is not None
        label = f"sdist {sdist_file.filename} (newest release, built from source as the HEAD stand-in)"
    sdist = index.download(sdist_file)
    if not build:
        info = inspect(sdist, family, sha256=sdist_file.sha256)
        return PreparedFrontend(frontend_spec(family, info, label), None, info)
    start = time.perf_counter()
    tree, digest = _unpack_sdist(sdist, workdir / "frontend" / "src")
    wheel, reused = cached_build(tree, workdir, index.pip_config(), digest, git=False)
    info = inspect(wheel, family, use_cache=False)
    label += ", its wheel built earlier from the same files" if reused else ""
    return PreparedFrontend(frontend_spec(family, info, label), wheel, info, tree, time.perf_counter() - start)


