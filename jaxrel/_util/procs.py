"""Every child process jaxrel starts: in its own process group, its output bounded, never outliving jaxrel.

:func:`run` is :func:`subprocess.run` for jaxrel: the child gets a new session (its own process
group, so a terminal's Ctrl-C reaches jaxrel alone), what it prints is read as it comes and only
the last :data:`MAX_OUTPUT` bytes of each stream are kept (a program that writes without end costs
no memory), and on a deadline or an interrupt the whole group gets SIGINT, a grace period, then
SIGKILL: a build backend that ignores signals, under uv, goes too. :func:`stop` does the same for a
:func:`popen` child. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

__all__ = ["DRAIN", "GRACE", "MAX_OUTPUT", "Terminated", "popen", "run", "signal_name", "stop",
           "terminate_as_interrupt"]

MAX_OUTPUT = 4 << 20  # bytes of each stream kept (the end of it: errors and answers come last)
GRACE = 3.0  # seconds between SIGINT and SIGKILL
DRAIN = 5.0  # seconds to read what a finished child left in its pipes (a daemon it started may hold them open)


HELD = (signal.SIGINT, signal.SIGTERM)


def popen(args: Sequence[str | Path], **options: Any) -> subprocess.Popen[Any]:
    """:class:`subprocess.Popen` in a new session (its own process group); stop it with :func:`stop`.

    An interrupt (SIGINT, SIGTERM) that comes while the child starts is held until :class:`subprocess.Popen`
    has returned it, then delivered as it would have been, the child stopped first: an interrupt never leaves
    one running unseen. It is held by a handler of the main thread (where Python delivers signals), not by
    blocking it: a blocked mask is inherited through ``exec``, and every child, and theirs, would start deaf
    to SIGINT and SIGTERM (a step of ``git bisect run`` could not clean up; only SIGKILL would end it).
    """
    command = [str(a) for a in args]
    if threading.current_thread() is not threading.main_thread() or None in map(signal.getsignal, HELD):
        return subprocess.Popen(command, start_new_session=True, **options)  # no Python handler runs here
    caught: list[signal.Signals] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signal.Signals(signum))) for sig in HELD}
    try:
        process = subprocess.Popen(command, start_new_session=True, **options)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if any(previous[sig] != signal.SIG_IGN for sig in caught):
        stop(process)
        for sig in caught:  # as it would have been delivered: KeyboardInterrupt, Terminated, or the default
            signal.raise_signal(sig)
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


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
        check: bool = False, max_output: int = MAX_OUTPUT, grace: float = GRACE) -> subprocess.CompletedProcess[Any]:
    """Run ``args`` to the end and capture its output (the last ``max_output`` bytes of each stream).

    Raises :class:`subprocess.TimeoutExpired` after ``timeout`` seconds and re-raises
    :class:`KeyboardInterrupt`, each after the whole process group was stopped (:func:`stop`);
    :class:`subprocess.CalledProcessError` with ``check`` as :func:`subprocess.run` does.
    """
    command = [str(a) for a in args]
    process = popen(command, cwd=cwd, env=None if env is None else dict(env),
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
    out, err = _joined(kept[0], max_output, text), _joined(kept[1], max_output, text)
    if check and process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command, out, err)
    return subprocess.CompletedProcess(command, process.returncode, out, err)
