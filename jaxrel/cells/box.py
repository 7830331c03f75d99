"""Other people's code in a box: a library's tests (downstream's cells and bisection steps) under bubblewrap.

What the box is (each part checked by tests/e2e/test_box_hostile.py with a test that misbehaves and passes):

- its own PID namespace, bubblewrap's ``--die-with-parent`` and ``--new-session``: when the run ends, at its budget
  or on Ctrl-C, every process in it goes, a double-forked ``setsid`` daemon included (the namespace's first
  process is the box's; when it dies the kernel kills the rest);
- no network (a namespace of its own with only loopback: a server on the host's loopback cannot be reached);
- the root file system read-only; ``/tmp``, ``/var/tmp``, ``/home`` and the user's home replaced by empty private
  ones, and so is every path the caller hides (the frontend's checkout, whose ``.git/config`` may hold a
  token); only the run's own directory is writable, the environment and the tests bound read-only (even where
  they lie under a hidden path), the interpreter the environment was made from too;
- a fresh ``/proc`` (no other process of the machine is visible) and ``/dev``;
- memory and process-count limits through cgroups where they can be written (v1 on these machines, v2 on CI
  runners): past its memory the run is killed by the kernel and reported as out of memory; a fork bomb meets
  the process limit; the group's peak memory is measured.

Where the box cannot be made (no bubblewrap, no namespaces), :func:`unavailable` says why and how to fix it; the
caller refuses, or runs unboxed only when asked to (``--unboxed``), and says so in its report.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from jaxrel._util import procs

__all__ = ["INSTALL_HINT", "KEPT", "Boxed", "Limits", "Spec", "command", "run", "run_at_home",
           "scrubbed_environment", "unavailable"]

INSTALL_HINT = "install bubblewrap (apt-get install bubblewrap), or pass --unboxed to run other people's tests unboxed"
HIDDEN = ("/tmp", "/var/tmp", "/home", "/root", "/run", "/mnt", "/media", "/srv")  # replaced by empty ones
CGROUPS = Path("/sys/fs/cgroup")
KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SOURCE_DATE_EPOCH", "PYTHONHASHSEED")
KEPT_PREFIXES = ("JAX_", "XLA_", "TF_CPP_")  # the backend's own settings (a user's XLA_FLAGS, say)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$|^AWS_|^GOOGLE_|^AZURE_", re.IGNORECASE)


def scrubbed_environment(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment other people's tests get: :data:`KEPT` and jax's settings from this one (never a variable
    whose name says it holds a secret), a private ``HOME`` and ``TMPDIR`` under ``home``, and ``extra``."""
    kept = {key: value for key, value in os.environ.items()
            if (key in KEPT or key.startswith(KEPT_PREFIXES)) and not SECRET_NAME.search(key)}
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    private = {"HOME": str(home), "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
               "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_DATA_HOME": str(home / ".local" / "share"), "PYTHONDONTWRITEBYTECODE": "1",
               "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1"}
    return {**kept, **private, **dict(extra or {})}


@dataclass(frozen=True)
class Limits:
    """The cgroup limits of one run (``None``: none)."""

    memory_bytes: int | None = None
    pids: int | None = 4096  # tasks: threads count too (XLA starts a pool per core)

    @classmethod
    def default(cls) -> Limits:
        """Half of this machine's memory, 4096 tasks."""
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return cls()
        return cls(memory_bytes=total // 2)


@dataclass(frozen=True)
class Spec:
    """Where the boxed command may write and what it may read beside the read-only root."""

    writable: tuple[Path, ...]  # the run's own directory (and its private home inside it)
    readable: tuple[Path, ...] = ()  # the environment, the tests: bound read-only even under a hidden path
    hidden: tuple[Path, ...] = ()  # paths replaced by empty ones besides HIDDEN and the user's home
    network: bool = False
    limits: Limits = field(default_factory=Limits.default)


@dataclass(frozen=True)
class Boxed:
    """How a boxed run ended."""

    returncode: int | None  # None: killed at the budget
    output: str
    seconds: float
    timed_out: bool = False
    network_isolated: bool = False
    boxed: bool = False
    out_of_memory: bool = False  # the kernel killed a process of the run at its memory limit
    peak_bytes: int | None = None  # the run's peak memory (its cgroup's), where measured


@functools.cache
def unavailable() -> str | None:
    """Why the box cannot be made on this machine (with the fix), or ``None`` when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap is not installed: {INSTALL_HINT}"
    try:
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
                               "--die-with-parent", "--new-session", "--", "true"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start ({error}): {INSTALL_HINT}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:200]
        return (f"bubblewrap cannot make namespaces here ({why}): allow unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1), run as root, or pass --unboxed")
    return None


def _interpreter_home(environment: Path) -> list[Path]:
    """The prefix of the interpreter a virtual environment was made from (its ``pyvenv.cfg`` ``home``'s parent):
    the environment's ``python`` links there, so the box binds it read-only."""
    config = environment / "pyvenv.cfg"
    try:
        lines = config.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return [Path(value.strip()).resolve().parent]
    return []


# Inside the box, between bubblewrap and the command: bubblewrap exits 128+N for a command a signal ended, as for
# one that exited 128+N; this says which (a crash is a signal, never an exit status) in a file the caller reads.
_STATUS = ("import subprocess, sys\nstatus = subprocess.call(sys.argv[2:])\n"
           "open(sys.argv[1], 'w').write(str(status))\nsys.exit(status if status >= 0 else 128 - status)\n")


def command(argv: Sequence[str], spec: Spec, cwd: Path, status: Path | None = None) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the box (``status``: where it writes how it ended)."""
    programs = [Path(argv[0])] if argv and os.path.isabs(argv[0]) else []
    if status is not None:
        argv = [sys.executable, "-I", "-S", "-c", _STATUS, str(status), *argv]
        programs.append(Path(sys.executable))
    bwrap = shutil.which("bwrap") or "bwrap"
    line = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", *(["--share-net"] if spec.network else []),
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    hidden = [*HIDDEN, str(Path.home()), *map(str, spec.hidden)]
    for path in dict.fromkeys(hidden):
        if os.path.isdir(path):
            line += ["--tmpfs", path]
    # the programs' prefixes, as named (a virtual environment, which may lie under a hidden path such as /tmp) and
    # as they resolve (the interpreter it links to, under a hidden home)
    runs = [prefix for program in programs for prefix in (program.parent.parent, program.resolve().parent.parent)]
    resolver = [Path("/run/systemd/resolve")] if spec.network else []  # /etc/resolv.conf may link there
    readable = [p for path in (*spec.readable, *runs, *resolver) for p in (path, *_interpreter_home(path))]
    for path in dict.fromkeys(str(p.resolve()) for p in readable):
        if os.path.exists(path):
            line += ["--ro-bind", path, path]
    for path in dict.fromkeys(str(p.resolve()) for p in spec.writable):
        os.makedirs(path, exist_ok=True)
        line += ["--bind", path, path]
    return [*line, "--chdir", str(cwd.resolve()), "--", *argv]


class _Cgroup:
    """A cgroup of its own for one run, v1 (a directory per controller) or v2 (one directory): its limits, the
    shell line that enters it before the box starts, its peak memory and whether the kernel killed for memory."""

    def __init__(self, limits: Limits) -> None:
        self.paths: dict[str, Path] = {}  # controller ("memory", "pids", or "" for v2) → its directory
        name = f"jaxrel-box-{uuid.uuid4().hex[:12]}"
        if (CGROUPS / "cgroup.controllers").is_file():  # v2: the unified hierarchy
            own = _own_group("")
            if own is not None and self._make("", own / name):
                self._write("", "memory.max", limits.memory_bytes)
                self._write("", "pids.max", limits.pids)
            return
        for controller, limit, files in (("memory", limits.memory_bytes, ("memory.limit_in_bytes",
                                                                          "memory.memsw.limit_in_bytes")),
                                         ("pids", limits.pids, ("pids.max",))):
            own = _own_group(controller)
            if limit is None or own is None or not self._make(controller, own / name):
                continue
            for file in files:
                self._write(controller, file, limit)

    def _make(self, controller: str, path: Path) -> bool:
        try:
            path.mkdir()
        except OSError:
            return False
        self.paths[controller] = path
        return True

    def _write(self, controller: str, file: str, value: int | None) -> None:
        if value is not None:
            try:
                (self.paths[controller] / file).write_text(str(value))
            except OSError:
                pass  # that limit is not offered here (memsw without swap accounting)

    def prefix(self) -> list[str]:
        """``sh -c`` that moves itself into every directory of the group, then executes the box."""
        if not self.paths:
            return []
        procs_files = [str(path / "cgroup.procs") for path in self.paths.values()]
        return ["/bin/sh", "-c", 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f"; shift; done; '
                'shift; exec "$@"', "box", *procs_files, "--"]

    def kill(self) -> None:
        """SIGKILL every task left in the group."""
        for path in self.paths.values():
            try:
                pids = (path / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError, ValueError):
                    pass

    def out_of_memory(self) -> bool:
        if "" in self.paths:
            return _counter(self.paths[""] / "memory.events", "oom_kill") > 0
        if "memory" in self.paths:  # v1: the kill counted (newer kernels), else the limit hit while under OOM
            control = self.paths["memory"] / "memory.oom_control"
            return _counter(control, "oom_kill") > 0 or (_number(self.paths["memory"] / "memory.failcnt") > 0
                                                         and _counter(control, "under_oom") > 0)
        return False

    def peak(self) -> int | None:
        if "" in self.paths:
            return _number(self.paths[""] / "memory.peak") or None
        if "memory" in self.paths:
            return _number(self.paths["memory"] / "memory.max_usage_in_bytes") or None
        return None

    def remove(self) -> None:
        for path in self.paths.values():
            for _ in range(50):  # the last tasks leave as the kernel reaps them
                try:
                    path.rmdir()
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.02)


def _own_group(controller: str) -> Path | None:
    """This process's cgroup directory for ``controller`` (v1) or in the unified hierarchy (``""``), if writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            where = (CGROUPS if controller == "" else CGROUPS / controller) / path.lstrip("/")
            return where if os.access(where, os.W_OK) else None
    return None


def _number(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


@contextmanager
def _cgroup(limits: Limits) -> Iterator[_Cgroup]:
    group = _Cgroup(limits)
    try:
        yield group
    finally:
        group.kill()
        group.remove()


def run(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], budget: float, spec: Spec,
        boxed: bool = True) -> Boxed:
    """Run ``argv`` for at most ``budget`` seconds in the box (``boxed=False``: as a plain child of its own
    session, the caller having said so), with exactly ``env``."""
    start = time.perf_counter()
    if not boxed:
        try:
            done = procs.run(list(argv), cwd=cwd, env=env, timeout=budget)
        except subprocess.TimeoutExpired as expired:
            return Boxed(None, _text(expired.stdout) + _text(expired.stderr), time.perf_counter() - start, True)
        return Boxed(done.returncode, done.stdout + "\n" + done.stderr, time.perf_counter() - start)
    status = spec.writable[0] / f".box-status-{uuid.uuid4().hex[:8]}" if spec.writable else None
    with _cgroup(spec.limits) as group:
        line = [*group.prefix(), *command(argv, spec, cwd, status)]
        try:
            done = procs.run(line, cwd=cwd, env=env, timeout=budget)
        except subprocess.TimeoutExpired as expired:  # procs stopped the box's group; the cgroup goes on leaving
            return Boxed(None, _text(expired.stdout) + _text(expired.stderr), time.perf_counter() - start, True,
                         not spec.network, True, group.out_of_memory(), group.peak())
        finally:
            ended = _status(status)
        code = ended if ended is not None else done.returncode
        return Boxed(code, done.stdout + "\n" + done.stderr, time.perf_counter() - start, False,
                     not spec.network, True, group.out_of_memory(), group.peak())


def _status(path: Path | None) -> int | None:
    """How the boxed command ended, as its wrapper wrote it (``None``: it wrote nothing), the file removed."""
    if path is None:
        return None
    try:
        text = path.read_text()
        path.unlink()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def run_at_home(home: Path, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None, budget: float,
                spec: Spec, boxed: bool = True) -> Boxed:
    """:func:`run` with a fresh private ``home`` (removed after) whose parent is the run's own directory, writable in
    the box, and the scrubbed environment (:func:`scrubbed_environment`) holding ``env``."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    try:
        return run(argv, cwd=cwd, env=scrubbed_environment(home, env), budget=budget,
                   spec=replace(spec, writable=(home.parent, *spec.writable)), boxed=boxed)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _text(data: object) -> str:
    return data if isinstance(data, str) else ""
