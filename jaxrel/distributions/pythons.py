"""Python interpreters on this machine, by ``major.minor``, with the wheel tags each accepts.

As uv finds them first, since uv makes the environments: ``uv python find X.Y`` names the
interpreter uv will use for a version, and ``uv python list --only-installed`` every CPython it
sees (its JSON, read at this boundary). Then today's search, for what uv misses: the running
interpreter, ``pythonX.Y`` on ``PATH`` and pyenv's versions (``$PYENV_ROOT/versions/*/bin``,
where pyenv shims fail unless a version is selected, and uv gives up on them). Each candidate is
run once to confirm what it is, and a compiled interpreter's answer is kept in jaxrel's cache while
its file is unchanged; uv failing, absent or answering garbage only leaves its part out. A
free-threaded build (``Py_GIL_DISABLED``: ``python3.13t``, uv's ``+freethreaded``, the ones
``scripts/free_threaded_python.sh`` builds into jaxrel's cache) answers ``3.13t``: it is the
interpreter of a ``3.13t`` cell and never of a ``3.13`` one, its wheels another ABI (``cp313t``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging import tags as packaging_tags
from packaging.tags import Tag

from jaxrel._util import files, kept, localfiles, procs
from jaxrel._util.text import shorten
from jaxrel.distributions.envs import find_uv
from jaxrel.errors import BadInput, EnvironmentFailure, JaxrelError

__all__ = ["Python", "PythonNotFound", "PythonVersionError", "all_pythons", "find_pythons", "free_threaded",
           "newest_python", "probe_answer", "python_for", "release_of", "supported_tags", "uv_find", "uv_interpreters",
           "version_key"]


class PythonNotFound(EnvironmentFailure):
    """No working interpreter for a requested version."""


class PythonVersionError(BadInput):
    """A requested Python version that is not of the form ``3.N`` (bad input, exit 2)."""


@dataclass(frozen=True)
class Python:
    """A working interpreter."""

    version: str  # "3.12"
    executable: str

    def tags(self, platforms: list[str] | None = None) -> list[Tag]:
        """Wheel tags this interpreter accepts, most specific first (CPython, this machine's platform)."""
        return supported_tags(self.version, platforms)


def free_threaded(version: str) -> bool:
    """Whether ``version`` (``"3.13t"``) names a free-threaded build (``Py_GIL_DISABLED``): another ABI."""
    return version.endswith("t")


def release_of(version: str) -> str:
    """The language version a build implements (``"3.13"`` for ``"3.13t"``): what ``Requires-Python`` and
    environment markers compare; the ABI is the wheel tags' business (:func:`supported_tags`)."""
    return version.removesuffix("t")


def version_key(version: str) -> tuple[int, int, int]:
    """A sort key: 3.13 before 3.13t before 3.14."""
    major, minor = (int(part) for part in release_of(version).split("."))
    return major, minor, int(free_threaded(version))


def supported_tags(version: str, platforms: list[str] | None = None) -> list[Tag]:
    """The tags a CPython ``version`` accepts on ``platforms`` (default: this machine's). A free-threaded build
    (``"3.13t"``) takes ``cp313t`` wheels and pure ones, never ``abi3`` (the stable ABI needs the GIL) nor the GIL
    build's ``cp313``."""
    major, minor = (int(part) for part in release_of(version).split("."))
    chosen = platforms if platforms is not None else list(packaging_tags.platform_tags())
    if free_threaded(version):
        own = [tag for tag in packaging_tags.cpython_tags((major, minor), abis=[f"cp{major}{minor}t"],
                                                          platforms=chosen) if tag.abi != "abi3"]
    else:
        own = list(packaging_tags.cpython_tags((major, minor), platforms=chosen))
    return [*own, *packaging_tags.compatible_tags((major, minor), f"cp{major}{minor}", platforms=chosen)]


def _uv_json(args: list[str]) -> object:
    """uv's JSON answer to ``args``, or ``None`` (no uv, a failure, not JSON)."""
    uv = find_uv()
    if uv is None:
        return None
    try:
        done = procs.run([uv, *args], timeout=60, env=_uv_search_environment())
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        return localfiles.loads_json(done.stdout, "uv python list")
    except JaxrelError:
        return None


def uv_interpreters() -> list[str]:
    """The CPython interpreters ``uv python list --only-installed`` reports, in uv's order (absolute paths: uv shows
    one under the working directory relative to it)."""
    listed = _uv_json(["python", "list", "--only-installed", "--output-format", "json", "--no-config"])
    if not isinstance(listed, list):
        return []
    return [os.path.abspath(entry["path"]) for entry in listed if isinstance(entry, dict)
            and entry.get("implementation") == "cpython" and isinstance(entry.get("path"), str) and entry["path"]]


def uv_find(version: str) -> str | None:
    """The interpreter ``uv python find`` picks for ``version`` (what uv will use), or ``None``."""
    uv = find_uv()
    if uv is None:
        return None
    try:
        done = procs.run([uv, "python", "find", "--no-config", version], timeout=60, env=_uv_search_environment())
    except (OSError, subprocess.SubprocessError):
        return None
    path = done.stdout.strip()
    return path if done.returncode == 0 and path and "\n" not in path and os.path.isabs(path) else None


def _pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def _pyenv_selected(root: Path) -> list[Path] | None:
    """The ``bin`` directories of the versions the pyenv at ``root`` has selected here (``pyenv version-name``,
    which reads ``PYENV_VERSION``, ``.python-version`` files and the global ``version`` file as its shims do);
    ``[]`` for ``system``; ``None`` when pyenv cannot say (not installed, a selected version missing)."""
    own = root / "bin" / "pyenv"
    pyenv = str(own) if own.is_file() else shutil.which("pyenv")  # a packaged pyenv lives outside its root
    if pyenv is None:
        return None
    try:
        done = procs.run([pyenv, "version-name"], timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    names = done.stdout.strip().split(":") if done.returncode == 0 else []
    if not names or not all(re.fullmatch(r"[\w.+/-]+", name) and ".." not in name for name in names):
        return None
    return [root / "versions" / name / "bin" for name in names if name != "system"]


def _uv_search_environment() -> dict[str, str]:
    """This process's environment for asking uv about interpreters (never downloading one), with pyenv's shims
    directory on ``PATH`` replaced by the directories of the versions pyenv has selected.

    A working shim runs the selected version's interpreter, and the others exit 127; uv runs every one it meets
    to ask what it is (about 0.1 s each), and ``uv python find`` gives up at the first that fails (0.4 s and no
    answer on this machine kind, where only 3.11 is selected). With the directories in their place uv sees
    the interpreters the working shims run, and none that fail. Unchanged when pyenv cannot say which versions
    are selected."""
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never",
            "PATH": _without_pyenv_shims(os.environ.get("PATH", ""), str(_pyenv_root()),
                                         os.environ.get("PYENV_VERSION"), os.getcwd())}


@cache
def _without_pyenv_shims(path: str, root: str, selection: str | None, cwd: str) -> str:
    """``path`` with the shims of the pyenv at ``root`` replaced as :func:`_uv_search_environment` says; asked
    once per process for each ``PATH``, pyenv, ``PYENV_VERSION`` and working directory (what pyenv's answer
    depends on, besides its version files)."""
    entries = path.split(os.pathsep)
    shims = str(Path(root) / "shims")
    if shims not in entries or (selected := _pyenv_selected(Path(root))) is None:
        return path
    replaced: list[str] = []
    for entry in entries:
        replaced += [str(directory) for directory in selected] if entry == shims else [entry]
    return os.pathsep.join(dict.fromkeys(replaced))


def _own_candidates() -> list[str]:
    """``python3.N`` on ``PATH``, then pyenv's versions: today's search, for what uv misses."""
    found = []
    for minor in range(8, 20):
        on_path = shutil.which(f"python3.{minor}")
        if on_path:
            found.append(on_path)
    root = _pyenv_root() / "versions"
    try:
        for version_dir in sorted(root.iterdir()) if root.is_dir() else []:
            names = (version_dir / "bin").glob("python3.*")
            found += sorted(str(p) for p in names if re.fullmatch(r"python3\.\d+t?", p.name))
    except OSError:
        pass  # an unreadable pyenv: its interpreters are not candidates; those on PATH still are
    return [*found, *_built_free_threaded()]


def _built_free_threaded() -> list[str]:
    """The free-threaded interpreters ``scripts/free_threaded_python.sh`` built into jaxrel's cache."""
    root = files.cache_root() / "free-threaded"
    try:
        return sorted(str(p) for p in root.glob("cpython-*/bin/python3.*t") if re.fullmatch(r"python3\.\d+t", p.name))
    except OSError:
        return []


def _candidates() -> list[str]:
    return [sys.executable, *uv_interpreters(), *_own_candidates()]


def _pyenv_shim(executable: str) -> bool:
    """A shim of the pyenv whose versions :func:`_own_candidates` lists: it runs one of those (or fails when no
    version is selected, as ``python3.12`` does beside a global 3.11), so it adds nothing but a slow probe."""
    return Path(executable).parent == _pyenv_root() / "shims"


def probe_answer(answer: bytes) -> str | None:
    """``"3.N"`` (or ``"3.Nt"``, a free-threaded build) when an interpreter's answer to the probe is one (bytes of
    any kind, checked); else ``None``."""
    text = answer.strip()
    return text.decode("ascii") if re.fullmatch(rb"3\.\d{1,3}t?", text) else None


# what an interpreter answers: its major.minor, with "t" for a free-threaded build (Py_GIL_DISABLED), whose
# extension modules and wheels (cp314t) are another ABI: never the interpreter of a "3.14" cell
_PROBE = ("import sys, sysconfig; print('%d.%d%s' % (sys.version_info[0], sys.version_info[1], "
          "'t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")


def _probe(executable: str) -> str | None:
    try:
        done = procs.run([executable, "-c", _PROBE], timeout=30,
                         text=False)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return probe_answer(done.stdout) if done.returncode == 0 else None


PROBES = "interpreters-2.json"  # under files.cache_root(): the probes' answers, by each interpreter file's identity
# ("-2": the answers tell free-threaded builds apart; the first file's "3.14" for one must not be reused)


def _identity(executable: str) -> tuple[str, list[int]] | None:
    """The file ``executable`` runs, and its identity (:func:`kept.identity_of`); ``None`` for a script (``#!``:
    what it runs can change without it) or a file that cannot be read."""
    try:
        real = os.path.realpath(executable)
        with open(real, "rb") as handle:
            status = os.fstat(handle.fileno())
            if handle.read(2) == b"#!":
                return None
    except OSError:
        return None
    return real, kept.identity_of(status)


class _Probes:
    """:func:`_probe` with its answers kept from run to run (:class:`kept.KeptAnswers`): a compiled interpreter
    whose file is unchanged is the same version. Only working interpreters are kept; a failure is asked again."""

    def __init__(self) -> None:
        path = files.cache_root() / PROBES
        self.known = kept.KeptAnswers(lambda: path)

    def __call__(self, executable: str) -> str | None:
        identity = _identity(executable)
        answer = self.known.get(*identity) if identity is not None else None
        if answer is not None:
            return probe_answer(answer.encode())
        version = _probe(executable)
        if version is not None and identity is not None:
            self.known.put(*identity, version)
        return version

    def save(self) -> None:
        self.known.save()


def find_pythons() -> dict[str, Python]:
    """``"3.12"`` → the first working interpreter of that version (GIL builds: every caller compares these
    versions as numbers); :func:`all_pythons` has the free-threaded ones too."""
    return {version: python for version, python in all_pythons().items() if not free_threaded(version)}


@cache
def all_pythons() -> dict[str, Python]:
    """``"3.12"`` → the first working interpreter of that version: the running one, then uv's list, then
    ``PATH``, pyenv and jaxrel's own free-threaded builds (:func:`_own_candidates`); a free-threaded build under its
    own key (``"3.13t"``), never a ``"3.13"``. uv lists while the others are probed."""
    probe = _Probes()
    with ThreadPoolExecutor(max_workers=8) as pool:  # each probe is an interpreter start, mostly waiting
        listed = pool.submit(uv_interpreters)
        own = [sys.executable, *_own_candidates()]
        answers = {c: pool.submit(probe, c) for c in dict.fromkeys(own) if not _pyenv_shim(c)}
        candidates = [sys.executable, *listed.result(), *own[1:]]
        answers.update({c: pool.submit(probe, c) for c in candidates if c not in answers and not _pyenv_shim(c)})
        versions = {c: future.result() for c, future in answers.items()}
    probe.save()
    found: dict[str, Python] = {}
    for executable in candidates:
        version = versions.get(executable)
        if version and version not in found:  # a free-threaded build answers "3.Nt": its own key
            found[version] = Python(version, executable)
    return dict(sorted(found.items(), key=lambda item: version_key(item[0])))


def newest_python() -> Python:
    """The newest working interpreter here, probing from the highest ``python3.N`` down (the running
    one when none is newer): one subprocess where :func:`find_pythons` runs one per interpreter."""
    running = (sys.version_info[0], sys.version_info[1])
    named = [(int(m.group(1)), c) for c in _candidates()[1:] if (m := re.search(r"python3\.(\d+)$", c))]
    for minor, executable in sorted(named, key=lambda item: (-item[0], "/shims/" in item[1])):  # shims: last
        if (3, minor) <= running:
            break
        version = _probe(executable)
        if version and not version.endswith("t") and tuple(map(int, version.split("."))) > running:
            return Python(version, executable)
    return Python(f"{running[0]}.{running[1]}", sys.executable)


@cache
def python_for(version: str) -> Python:
    """The interpreter for ``version`` (``"3.12"``), or :class:`PythonNotFound` naming what exists.

    Asked once per version per process (``uv python find`` and a probe cost about 0.5 s, and a compat run asks
    several times per cell); ``python_for.cache_clear()`` forgets the answers."""
    if not re.fullmatch(r"3\.\d{1,3}t?", version):
        raise PythonVersionError(f"Python version {shorten(version)!r} is not of the form 3.N or 3.Nt (e.g. 3.12, "
                                 "or 3.13t for a free-threaded build)")
    chosen = uv_find(version.replace("t", "+freethreaded") if free_threaded(version) else version)
    if chosen is not None and _probe(chosen) == version:
        return Python(version, chosen)
    pythons = all_pythons()
    if version not in pythons:
        how = (f"build one: scripts/free_threaded_python.sh {release_of(version)} (CPython from Debian's source, "
               "--disable-gil, into jaxrel's cache, where jaxrel finds it)" if free_threaded(version)
               else f"install it (e.g. pyenv install {version})")
        raise PythonNotFound(
            f"no working Python {version} interpreter on PATH, under pyenv or in jaxrel's cache (found: "
            f"{', '.join(pythons) or 'none'}); {how} or choose another --python"
        )
    return pythons[version]
