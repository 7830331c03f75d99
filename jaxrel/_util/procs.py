"""Every child process jaxrel starts: in its own process group, its output bounded, never outliving jaxrel.

:func:`run` is :func:`subprocess.run` for jaxrel: the child gets a new session (its own process
group, so a terminal's Ctrl-C reaches jaxrel alone), what it prints is read as it comes and only
the last :data:`MAX_OUTPUT` bytes of each stream are kept (a program that writes without end costs
no memory), and on a deadline or an interrupt the whole group gets SIGINT, a grace period, then
SIGKILL: a build backend that ignores signals, under uv, goes too. :func:`stop` does the same for a
:func:`popen` child. Standard library only.

An interrupt reaches every child, whichever thread waits for it. :func:`interrupts_stop_children` (the command
line runs every verb inside it) turns SIGINT and SIGTERM into :func:`stop_all`, then :class:`KeyboardInterrupt`
in the main thread: every live child's group and every process descended from jaxrel (a build backend that put
itself in a session of its own included) gets SIGINT, and SIGKILL after :data:`GRACE`; from then on no child
starts (:func:`popen` raises :class:`KeyboardInterrupt` in whichever thread asks) and a child that ends returns
no result to read as its answer (:func:`run` raises :class:`KeyboardInterrupt` too). A worker thread waiting on a
build, an environment or a cell therefore ends within the grace, and so does the pool the main thread joins.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any, ParamSpec, TypeVar

__all__ = ["DRAIN", "GRACE", "HOLD", "MAX_OUTPUT", "PHASES", "Terminated", "finish_stopping", "in_phase",
           "interrupts_stop_children", "phase", "popen", "run", "signal_name", "stop", "stop_all"]

MAX_OUTPUT = 4 << 20  # bytes of each stream kept (the end of it: errors and answers come last)


def _grace(text: str | None, default: float = 3.0) -> float:
    """``JAXREL_STOP_GRACE``: seconds between SIGINT and SIGKILL (0 to 60); anything else is the default."""
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if 0.0 <= value <= 60.0 else default


GRACE = _grace(os.environ.get("JAXREL_STOP_GRACE"))  # seconds between SIGINT and SIGKILL (default 3)
DRAIN = 5.0  # seconds to read what a finished child left in its pipes (a daemon it started may hold them open)


HELD = (signal.SIGINT, signal.SIGTERM)
P = ParamSpec("P")
R = TypeVar("R")

PHASES = {  # every phase of a verb that runs children: each has its Ctrl-C case in tests/e2e/test_interrupts.py
    "bisect.build": "bisect builds a revision of the frontend (its build environment, uv build)",
    "bisect.environment": "bisect builds the cell's environment and each probe slot's copy",
    "bisect.step": "bisect runs a step (git bisect run, a multisection round's probes, the endpoints)",
    "bisect.step-tests": "a bisect step runs the frontend's tests",
    "compat.environment": "compat builds a cell's environment",
    "compat.cell": "compat runs a cell (the guard, the import, the suites)",
    "atlas.environment": "the atlas builds a cell's environment",
    "atlas.cell": "the atlas runs a cell",
    "history.replay": "history replay runs a night's compat",
    "history.bisect-new": "history bisect-new (and replay) runs bisect on a regression",
    "downstream.environment": "downstream builds a library's environment",
    "downstream.tests": "downstream runs a library's tests",
    "downstream.bisection": "downstream bisects the frontend for a regressed library",
    "release.build": "release build builds a component",
}
HOLD = "JAXREL_TEST_HOLD"  # PHASE=COMMAND (shell words): put in front of every child of PHASE (the interrupt tests)
_phase = threading.local()


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """The children this thread starts within the block belong to phase ``name`` (one of :data:`PHASES`), and to
    the phases around it (downstream's bisection runs bisect's)."""
    assert name in PHASES, name
    previous = getattr(_phase, "names", ())
    _phase.names = (*previous, name)
    try:
        yield
    finally:
        _phase.names = previous


def in_phase(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function whose children belong to phase ``name`` (:func:`phase` around its body)."""
    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def within(*args: P.args, **kwargs: P.kwargs) -> R:
            with phase(name):
                return function(*args, **kwargs)
        return within
    return decorate


def _held(command: list[str]) -> list[str]:
    """``command``, or, when :data:`HOLD` names a phase this thread is in, the holder it names in front of it: how
    the interrupt tests put a child of their own making (one that honours SIGINT, ignores it, or leaves jaxrel's
    session) exactly where a phase starts its child, and interrupt jaxrel while that child runs."""
    wanted = os.environ.get(HOLD, "")
    name, _, holder = wanted.partition("=")
    if not wanted or name not in getattr(_phase, "names", ()):
        return command
    return [*shlex.split(holder), *command]


_live: dict[int, subprocess.Popen[Any]] = {}  # every child popen started, by pid, until it is seen to have ended
_lock = threading.RLock()  # re-entrant: a second Ctrl-C may arrive while the first one's handler holds it
_stopping = threading.Event()  # set by stop_all: no child starts after it
_stopped = threading.Event()  # set when stop_all's SIGKILL has gone out (or nothing was left to kill)


def _register(process: subprocess.Popen[Any]) -> None:
    with _lock:
        for pid in [pid for pid, known in _live.items() if known.returncode is not None]:
            del _live[pid]  # reaped by whoever waited for it
        _live[process.pid] = process


def _descendants() -> dict[int, int]:
    """Every process below this one (pid → its process group), by walking ``/proc`` (empty off Linux)."""
    parents: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 3 and fields[0] != b"Z":
            parents[int(entry)] = (int(fields[1]), int(fields[2]))  # ppid, pgrp
    below: dict[int, int] = {}
    frontier = [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, group) in parents.items():
            if ppid == parent and pid not in below:
                below[pid] = group
                frontier.append(pid)
    return below


def _become_subreaper() -> None:
    """Orphans of jaxrel's children (a double fork, a parent killed first) are re-parented to jaxrel, not to init,
    so :func:`_descendants` still finds them (Linux ``PR_SET_CHILD_SUBREAPER``; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _signal_everything(sig: int) -> None:
    with _lock:
        groups = {pid for pid, process in _live.items() if process.returncode is None}
    below = _descendants()
    own = os.getpgrp()
    for group in groups | {group for group in below.values() if group != own}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for pid in below:  # one in jaxrel's own group (a forked worker) is signalled alone
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _kill_until_none_left(within: float = 5.0) -> None:
    """SIGKILL every process below jaxrel, again until two walks in a row find none (at most ``within`` seconds).
    One walk of ``/proc`` can miss an orphan while it is re-parented: its parent (a stopped step, a holder that
    honoured SIGINT) exits between the walk's read of the orphan and of itself, and the orphan is seen nowhere
    below jaxrel; it was once in four fresh-clone runs of the interrupt tests."""
    end, empty = time.monotonic() + within, 0
    while empty < 2 and time.monotonic() < end:  # two walks in a row find nothing: the re-parenting is over
        _signal_everything(signal.SIGKILL)
        time.sleep(0.05)
        empty = empty + 1 if not _descendants() else 0


def stop_all(grace: float = GRACE) -> None:
    """Stop every child jaxrel started and everything below them, from a signal handler or any thread: SIGINT
    now, SIGKILL ``grace`` seconds later (from a background thread; :func:`finish_stopping` waits for it). Returns
    at once; from now on no child starts. A second call (a second Ctrl-C) changes nothing."""
    with _lock:
        if _stopping.is_set():
            return
        _stopping.set()
    _become_subreaper()
    _signal_everything(signal.SIGINT)

    def kill_later() -> None:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _descendants():
            time.sleep(0.05)
        _kill_until_none_left()
        _stopped.set()

    threading.Thread(target=kill_later, name="jaxrel-stop", daemon=True).start()


def finish_stopping() -> None:
    """After :func:`stop_all`: wait until its SIGKILL has gone out (at most the grace), so that jaxrel never exits
    with a child that ignored SIGINT still running. Without :func:`stop_all`: nothing."""
    if _stopping.is_set():
        _stopped.wait(GRACE + 10.0)  # the grace, then the SIGKILL sweeps (at most 5 s)


def _interrupted(signum: int, frame: FrameType | None) -> None:
    stop_all()
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


@contextlib.contextmanager
def interrupts_stop_children() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM stop every child (:func:`stop_all`) and raise :class:`KeyboardInterrupt`
    (:class:`Terminated` for SIGTERM) in the main thread; elsewhere, or off the main thread: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _interrupted) for sig in HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def popen(args: Sequence[str | Path], *, cleanup: bool = False, **options: Any) -> subprocess.Popen[Any]:
    """:class:`subprocess.Popen` in a new session (its own process group); stop it with :func:`stop`.

    While jaxrel stops (after :func:`stop_all`) only a ``cleanup`` child starts (``git bisect reset`` on the way out):
    any other raises :class:`KeyboardInterrupt`.

    An interrupt (SIGINT, SIGTERM) that comes while the child starts is held until :class:`subprocess.Popen`
    has returned it, then delivered as it would have been, the child stopped first: an interrupt never leaves
    one running unseen. It is held by a handler of the main thread (where Python delivers signals), not by
    blocking it: a blocked mask is inherited through ``exec``, and every child, and theirs, would start deaf
    to SIGINT and SIGTERM (a step of ``git bisect run`` could not clean up; only SIGKILL would end it).
    """
    command = _held([str(a) for a in args])
    if _stopping.is_set() and not cleanup:
        raise KeyboardInterrupt  # jaxrel is stopping: whichever thread asks, nothing new starts
    if threading.current_thread() is not threading.main_thread() or None in map(signal.getsignal, HELD):
        with _lock:  # stop_all cannot pass between the check and the registration
            if _stopping.is_set() and not cleanup:
                raise KeyboardInterrupt
            process = subprocess.Popen(command, start_new_session=True, **options)  # no Python handler runs here
            _register(process)
        return process
    caught: list[signal.Signals] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signal.Signals(signum))) for sig in HELD}
    try:
        process = subprocess.Popen(command, start_new_session=True, **options)
        _register(process)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if any(previous[sig] != signal.SIG_IGN for sig in caught):
        stop(process)
        for sig in caught:  # as it would have been delivered: KeyboardInterrupt, Terminated, or the default
            signal.raise_signal(sig)
    if _stopping.is_set() and not cleanup:  # another thread's stop_all passed while this child started
        stop(process)
        raise KeyboardInterrupt
    return process


def signal_name(number: int) -> str:
    """A signal in words, for a process it ended: ``SIGSEGV (signal 11)``, or ``signal 99`` for one without a name."""
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


class Terminated(KeyboardInterrupt):
    """SIGTERM (what CI runners, ``timeout`` and service managers send), handled as an interrupt: every child's
    process group is stopped on the way out, as for Ctrl-C."""


def _signal_group(process: subprocess.Popen[Any], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(process: subprocess.Popen[Any], grace: float = GRACE) -> None:
    """End ``process`` and everything in its process group: SIGINT, up to ``grace`` seconds, then SIGKILL."""
    if process.poll() is None:
        _signal_group(process, signal.SIGINT)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(process, signal.SIGKILL)  # what the leader left behind goes too
    if process.poll() is None:
        process.kill()
    process.wait()


def _drain(stream: IO[bytes], kept: deque[bytes], limit: int) -> None:
    size = 0
    descriptor = stream.fileno()  # os.read returns what the pipe holds now; a buffered read(n) waits for n bytes
    for chunk in iter(lambda: os.read(descriptor, 65536), b""):
        kept.append(chunk)
        size += len(chunk)
        while size - len(kept[0]) >= limit and len(kept) > 1:
            size -= len(kept.popleft())
    stream.close()


def _joined(kept: deque[bytes], limit: int, text: bool) -> str | bytes:
    data = b"".join(kept)[-limit:]
    return data.decode("utf-8", "replace") if text else data


def run(args: Sequence[str | Path], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
        timeout: float | None = None, input: str | bytes | None = None, text: bool = True,
        check: bool = False, max_output: int = MAX_OUTPUT, grace: float = GRACE,
        cleanup: bool = False) -> subprocess.CompletedProcess[Any]:
    """Run ``args`` to the end and capture its output (the last ``max_output`` bytes of each stream).

    Raises :class:`subprocess.TimeoutExpired` after ``timeout`` seconds and re-raises
    :class:`KeyboardInterrupt`, each after the whole process group was stopped (:func:`stop`);
    :class:`subprocess.CalledProcessError` with ``check`` as :func:`subprocess.run` does. While jaxrel stops
    (:func:`stop_all`), :class:`KeyboardInterrupt` instead of a result, unless ``cleanup`` (see :func:`popen`).
    """
    command = [str(a) for a in args]
    process = popen(command, cleanup=cleanup, cwd=cwd, env=None if env is None else dict(env),
                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kept: tuple[deque[bytes], deque[bytes]] = (deque(), deque())
    readers = [threading.Thread(target=_drain, args=(stream, store, max_output), daemon=True)
               for stream, store in ((process.stdout, kept[0]), (process.stderr, kept[1]))]
    for reader in readers:
        reader.start()
    try:
        if input is not None:
            assert process.stdin is not None
            try:
                process.stdin.write(input.encode() if isinstance(input, str) else input)
                process.stdin.close()
            except BrokenPipeError:
                pass
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            process.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop(process, grace)
            for reader in readers:
                reader.join(1.0)
            raise subprocess.TimeoutExpired(command, timeout or 0.0, _joined(kept[0], max_output, text),
                                            _joined(kept[1], max_output, text)) from None
        _signal_group(process, signal.SIGKILL)  # the leader is done: what it left in its group goes too
        left = DRAIN if deadline is None else min(DRAIN, max(deadline - time.monotonic(), 1.0))
        drained = time.monotonic() + left
        for reader in readers:  # a daemon in its own session keeps the pipe open: not waited for past this
            reader.join(max(0.0, drained - time.monotonic()))
    except BaseException:  # Ctrl-C (KeyboardInterrupt) or anything else: no child outlives the call
        stop(process, grace)
        raise
    if _stopping.is_set() and not cleanup:  # stopped by an interrupt another thread took: no answer
        raise KeyboardInterrupt
    out, err = _joined(kept[0], max_output, text), _joined(kept[1], max_output, text)
    if check and process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command, out, err)
    return subprocess.CompletedProcess(command, process.returncode, out, err)
