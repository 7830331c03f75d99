"""``jaxrel release collect DIR... --output OUT``: the wheels and sdists a build matrix made, gathered into
one release directory with its manifest, after checking that they are one family release.

jaxlib and the plugins are built by jax's own Bazel build in a CI matrix of Pythons x platforms,
each job uploading its files as an artifact; a collect job downloads them all and runs this. Every
file (found anywhere below the given directories) must be:

* a distribution of the release (a component of ``[tool.jaxrel.release]``; one released separately,
  ROCm say, is refused), named validly, at the one version of the release (the tagged commit's, when
  the project tree is there);
* what it says it is: one ``.dist-info`` directory, METADATA in UTF-8 with the file name's name and
  version, WHEEL's tags the file name's, every member matches RECORD (read from the file's bytes every
  time: a cache is a hint, and a planted verdict must not let a lying wheel through); one wheel per slot;
* covered: each plugin released with the backend has a wheel for every (Python, platform) the
  backend has, on the platforms that plugin family builds for (CUDA: Linux), and the backend has one
  for every plugin wheel (one ``py3`` wheel per platform for a pjrt); with ``--pythons`` /
  ``--platforms``, the backend covers that whole matrix.

Anything else refuses the whole collection (exit 1) naming the file and the fix; ``OUT`` is written
only when everything passed, in one step (it must be new or empty). Then ``verify``, ``attest`` and
``publish`` work on ``OUT`` as on the output of ``release build``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel._util.files import sha256_of
from jaxrel._util.parallel import in_background, workers
from jaxrel._util.progress import Progress, silent
from jaxrel.distributions.archives import WheelError, verify_record
from jaxrel.distributions.filenames import (
    FilenameError,
    Slot,
    grid_holes,
    name_and_version,
    platform_family,
    serves,
    slot_text,
    wheel_slots,
)
from jaxrel.distributions.wheels import ArtifactInfo, inspect
from jaxrel.errors import BadInput, Refused
from jaxrel.release import locations
from jaxrel.release.config import Component, ReleaseConfig
from jaxrel.release.manifest import Artifact, Manifest
from jaxrel.release.plan import make_plan
from jaxrel.release.project import Project
from jaxrel.release.verify import filename_problems

__all__ = ["CollectRefused", "Collection", "collect", "coverage_problems"]

SUFFIXES = (".whl", ".tar.gz")


class CollectRefused(Refused):
    """The files do not make one release (exit 1); nothing was written."""


@dataclass
class Collection:
    """What was gathered: the manifest written to ``output``, and what was noted on the way."""

    manifest: Manifest
    output: Path
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class _Found:
    path: Path
    component: Component
    version: Version
    sha256: str
    info: ArtifactInfo


MAX_DEPTH = 64  # directories below a given one: a CI artifact nests a few, not this many


def _walk(directory: Path) -> list[Path]:
    """Every regular file below ``directory`` (not through symbolic links), iteratively: a tree nested deeper
    than Python's recursion limit is refused in one line, not a RecursionError."""
    found: list[Path] = []
    stack = [(directory, 0)]
    while stack:
        folder, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadInput(f"{folder}: nested more than {MAX_DEPTH} directories below {directory}; pass the "
                           "directories the build jobs' artifacts are in")
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    found.append(Path(entry.path))
                elif entry.name.endswith(SUFFIXES):  # a FIFO, socket, device or symlink named as a wheel or sdist
                    kind = localfiles.not_regular(entry.path) or "a symbolic link"
                    raise BadInput(f"{entry.path}: {kind}, not a built artifact; remove it (the build jobs' "
                                   "artifacts are regular files)")
    return sorted(found)


def _files(directories: Sequence[Path]) -> list[Path]:
    """Every wheel and sdist below ``directories`` (a CI artifact nests them), one per name."""
    found: dict[str, Path] = {}
    for directory in directories:
        if not directory.is_dir():
            raise BadInput(f"{directory}: not a directory; pass the directories the build jobs' artifacts are in")
        for path in _walk(directory):
            if not path.name.endswith(SUFFIXES):
                continue
            if path.name in found and sha256_of(found[path.name]) != sha256_of(path):
                raise CollectRefused(f"{path.name}: two different files of that name ({found[path.name]} and "
                                     f"{path}); keep the one the build made and remove the other")
            found.setdefault(path.name, path)
    if not found:
        raise BadInput(f"no wheel or sdist below {', '.join(map(str, directories))}; pass the build jobs' artifacts")
    return [found[name] for name in sorted(found)]


def _one(path: Path, components: dict[str, Component], project: Project) -> _Found:
    try:
        name, version = name_and_version(path.name)
    except FilenameError as error:
        raise CollectRefused(str(error)) from None
    component = components.get(str(canonicalize_name(name)))
    if component is None:
        raise CollectRefused(f"{path.name}: {name} is not a distribution of the {project.family.name} release "
                             f"(its components: {', '.join(components)}); remove it from the artifacts")
    if component.released_separately:
        raise CollectRefused(f"{path.name}: {name} is released separately, on its own schedule; release it on its own")
    digest = sha256_of(path)
    try:  # no cache: a release is checked from its bytes (a cached verdict could be planted)
        info = inspect(path, project.family, sha256=digest, use_cache=False)
    except WheelError as error:
        raise _rebuild(path, error) from None
    if problems := filename_problems(path, info):  # the name, version and tags its metadata declares
        raise CollectRefused(f"{path.name}: {'; '.join(problems)}; rebuild it")
    return _Found(path, component, version, digest, info)


def _rebuild(path: Path, error: WheelError) -> CollectRefused:
    """A file that is not what a build makes (its archive's own words, without its path): rebuild it."""
    return CollectRefused(f"{path.name}: {str(error).removeprefix(f'{path}: ')}; rebuild it")


def _record_checked(item: _Found) -> int | None:
    """Every member of a wheel against its RECORD, and how many (the most work of a collect: it comes after the
    checks that need only names and METADATA, so a set with a hole is refused in seconds); ``None`` for an sdist."""
    if not item.path.name.endswith(".whl"):
        return None
    try:
        return verify_record(item.path)
    except WheelError as error:
        raise _rebuild(item.path, error) from None


def _one_per_slot(name: str, files: Sequence[_Found]) -> None:
    """Two wheels of one component for one slot (a build-tagged rebuild beside the first build) leave the choice to
    pip's build-tag ordering: refused, naming both."""
    seen: dict[Slot, str] = {}
    for item in files:
        if not item.path.name.endswith(".whl"):
            continue
        for slot in wheel_slots([item.path.name]):
            if slot in seen:
                raise CollectRefused(f"{item.path.name}: a second {name} wheel for {slot_text(slot)} beside "
                                     f"{seen[slot]} (a build tag or a rebuild); keep one of them")
            seen[slot] = item.path.name


def _slots(found: Sequence[_Found]) -> set[Slot]:
    return wheel_slots(f.path.name for f in found)


def _file_in(files: Sequence[_Found], slot: Slot) -> str:
    return next(f.path.name for f in files if slot in wheel_slots([f.path.name]))


def coverage_problems(by_component: dict[str, list[_Found]], backend: Component | None,
                      plugins: Sequence[Component], pythons: Sequence[str], platforms: Sequence[str]) -> list[str]:
    """The backend's grid has no hole (against itself, and against ``--pythons``/``--platforms`` when given), each
    plugin fills the backend's slots on its own platforms, ABI included, and the backend every plugin's; one line
    per gap, naming what is missing and where it would come from."""
    problems = []
    for name, files in by_component.items():  # every component built per CPython: no hole in its own grid
        own = _slots(files)
        if backend is not None and name != backend.distribution:
            continue  # a plugin's grid is the backend's, checked below
        problems += [f"{name} has no {slot_text(hole)} wheel, though it has {hole[0]}-{hole[1]} wheels for other "
                     f"platforms and other interpreters' wheels for {hole[2]}: add that build job's artifact"
                     for hole in grid_holes(own)]
        if any(interpreter.startswith("cp") for interpreter, _, _ in own):
            columns = sorted({platform for _, _, platform in own})
            wanted = [(py, plat) for py in pythons for plat in platforms or columns]
            problems += [f"{name} has no wheel for {py} on {plat} (--pythons/--platforms ask for it): add that build "
                         "job's artifact" for py, plat in wanted
                         if not any(serves(slot, py) and plat in slot[2].split(".") for slot in own)]
    if backend is None:
        return problems
    have = _slots(by_component.get(backend.distribution, []))
    for plugin in plugins:
        files = by_component.get(plugin.distribution, [])
        own = _slots(files)
        if own and all(platform == "any" for _, _, platform in own):
            continue  # a pure plugin: one wheel serves every slot the backend has
        covered = plugin.expected_slots(have)
        for slot in sorted(covered - own):
            problems.append(f"{plugin.distribution} has no {slot_text(slot)} wheel, which {backend.distribution} "
                            f"has: add its wheel from that build job, or leave that {backend.distribution} wheel out")
        for slot in sorted(own - covered):
            problems.append(f"{_file_in(files, slot)}: {backend.distribution} has no {slot_text(slot)} wheel beside "
                            f"it (the plugin would be installable without its backend): add the "
                            f"{backend.distribution} wheel of that build job, or leave this one out")
    return problems


def _named_by_frontend(by_component: dict[str, list[_Found]], release: ReleaseConfig,
                       wanted: Version) -> dict[str, str]:
    """Components released with the frontend that its METADATA names at this version (an extra's ``==V`` or
    ``>=V,<=V``): distribution → the requirement. A whole plugin family missing is then seen without a tree."""
    frontend = next((c for c in release.components if c.role == "frontend"), None)
    wheel = next((f for f in by_component.get(frontend.distribution, []) if f.path.name.endswith(".whl")), None) \
        if frontend is not None else None
    if wheel is None:
        return {}
    together = {str(canonicalize_name(c.distribution)): c.distribution for c in release.released_with()}
    named: dict[str, str] = {}
    for text in wheel.info.requires_dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        name = together.get(str(canonicalize_name(requirement.name)))
        if name is not None and requirement.specifier and requirement.specifier.contains(wanted, prereleases=True):
            named.setdefault(name, text)
    return named


def dropped(previous: set[Slot], now: set[Slot], allowed: Sequence[str]) -> list[str]:
    """What the backend's grid had at the previous release and lacks now: interpreters (with their ABI: ``cp313t``;
    one a stable-ABI wheel now serves, ``cp311-abi3`` for ``cp312``, is not dropped) and platforms (without their
    floor: raising manylinux_2_17 to 2_27 drops nothing), less those ``--drop`` names."""
    def builds(slots: set[Slot]) -> set[str]:
        return {abi if abi.startswith(interpreter) else f"{interpreter}-{abi}" for interpreter, abi, _ in slots
                if interpreter.startswith("cp")}

    def families(slots: set[Slot]) -> set[str]:
        return {platform_family(platform) for _, _, platform in slots}

    gone = [build for build in sorted(builds(previous) - builds(now)) if not any(serves(slot, build) for slot in now)]
    gone += sorted(families(previous) - families(now))
    return [item for item in gone if item not in allowed]


def collect(project: Project, directories: Sequence[Path], output: Path, *, version: str | None = None,
            pythons: Sequence[str] = (), platforms: Sequence[str] = (), progress: Progress = silent,
            previous: Callable[[str, Version], tuple[str, set[Slot]] | None] | None = None,
            drop: Sequence[str] = ()) -> Collection:
    """Check the files below ``directories`` as one release and gather them into ``output`` with a manifest.

    :class:`CollectRefused` (exit 1) names the first file that does not belong and the fix; nothing is
    written then. ``output`` must be new or empty (:class:`~jaxrel.errors.BadInput` otherwise).
    """
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise BadInput(f"--output {output} is not an empty directory; pass a new one")
    release = project.release
    notes: list[str] = []
    try:
        declared: str | None = project.version_of(release.lead())
    except (locations.LocationError, BadInput):
        if project.is_git or (project.root / "pyproject.toml").is_file():
            raise BadInput(f"{project.root} is a checkout, but not of {project.family.name} (its version files are "
                           f"not there); run collect in {project.family.name}'s checkout of the release tag, or "
                           "outside any checkout with --version V") from None
        declared = None
        notes.append(f"no {project.family.name} tree at {project.root}: the versions are not compared with a "
                     "tagged commit's (run collect in the checkout of the release tag)")
    if version is None and declared is None:
        raise BadInput("give --version V, or run collect in the release's checkout (its files declare V)")
    wanted = policy.parse_version(version or declared or "", "--version")
    if declared is not None and policy.parse_version(declared, "declared version") != wanted:
        raise CollectRefused(f"collecting {wanted}, but the tree at {project.root} declares {declared}; check out "
                             f"the tag {release.tag_for(str(wanted))}, or pass its version")
    backend = release.backend()
    earlier = (in_background(lambda: previous(backend.distribution, wanted))  # the index, while the files are read
               if previous is not None and backend is not None else None)
    components = {str(canonicalize_name(c.distribution)): c for c in release.components}
    paths = _files(directories)
    progress(f"collect: {len(paths)} files; checking names, METADATA and tags …")
    with ThreadPoolExecutor(workers(), thread_name_prefix="collect") as pool:
        found = list(pool.map(lambda path: _one(path, components, project), paths))
    for item in found:
        if item.version != wanted:
            raise CollectRefused(f"{item.path.name}: version {item.version}, but the release is {wanted}: a file "
                                 f"from another release; take the {item.component.distribution} {wanted} artifact")
    by_component: dict[str, list[_Found]] = {}
    for item in found:
        by_component.setdefault(item.component.distribution, []).append(item)
    for name, files in by_component.items():
        _one_per_slot(name, files)
    plan = make_plan(project, str(wanted)) if declared is not None else None
    expected = ([c for c in release.released_with() if c.distribution in plan.upload_order] if plan is not None
                else [c for c in release.released_with() if c.distribution in by_component])
    named = _named_by_frontend(by_component, release, wanted)
    expected += [c for c in release.released_with() if c.distribution in named and c not in expected]
    missing = [c.distribution for c in expected if c.distribution not in by_component]
    if missing and any(m in named for m in missing):
        first = next(m for m in missing if m in named)
        raise CollectRefused(f"{first} {wanted}: no file, but the frontend's METADATA names it ({named[first]}); "
                             "add the artifacts of the job that builds it")
    sdists = [c.distribution for c in expected if c.sdist and c.distribution in by_component
              and not any(f.path.name.endswith(".tar.gz") for f in by_component[c.distribution])]
    if sdists:
        raise CollectRefused(f"{sdists[0]} {wanted}: wheels but no sdist, and it publishes one with every release "
                             "(sdist = true, the default for a frontend): add the sdist from that build job")
    if missing:
        raise CollectRefused(f"{', '.join(missing)} {wanted}: no file, but the release includes it; add the "
                             "artifacts of the job that builds it")
    plugins = [c for c in expected if c.role == "plugin"]
    problems = coverage_problems(by_component, backend if backend and backend in expected else None, plugins,
                                 pythons, platforms)
    if problems:
        raise CollectRefused(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    if earlier is not None and backend is not None and backend.distribution in by_component:
        before = earlier()
        if before is None:
            notes.append(f"no earlier {backend.distribution} release on the index: its grid was compared with none")
        else:
            gone = dropped(before[1], _slots(by_component[backend.distribution]), drop)
            if gone:
                raise CollectRefused(f"{backend.distribution} {wanted} has no wheel for {', '.join(gone)}, which "
                                     f"{before[0]} had: name what the release drops with --drop {gone[0]} (one per "
                                     "interpreter or platform), or add the build job's artifacts")
    progress(f"collect: checking every member of {len(found)} files against RECORD …")
    biggest_first = sorted(found, key=lambda f: -f.path.stat().st_size)
    with ThreadPoolExecutor(workers(), thread_name_prefix="collect") as pool:
        checked = dict(zip((f.path for f in biggest_first), pool.map(_record_checked, biggest_first), strict=True))
    commit = (project.git("rev-parse", "HEAD").stdout.strip() or None) if declared is not None and project.is_git \
        else None
    order = {c.distribution: i for i, c in enumerate(release.components)}
    artifacts = tuple(Artifact(item.path.name, item.component.distribution, str(wanted), item.component.role,
                               "wheel" if item.path.name.endswith(".whl") else "sdist", item.sha256,
                               item.path.stat().st_size, checked[item.path])
                      for item in sorted(found, key=lambda f: (order[f.component.distribution], f.path.name)))
    manifest = Manifest(project.family.name, str(wanted), release.tag_for(str(wanted)), commit, artifacts)
    _write(output, found, manifest)
    progress(f"collect: {len(found)} files of {project.family.name} {wanted} in {output}")
    return Collection(manifest, output, notes)


def _write(output: Path, found: Sequence[_Found], manifest: Manifest) -> None:
    """The files and the manifest into ``output`` in one step (hard links where the file system allows)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        for item in found:
            try:
                os.link(item.path, staging / item.path.name)
            except OSError:
                shutil.copy2(item.path, staging / item.path.name)
        manifest.write(staging)
        if output.exists():
            output.rmdir()
        os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
