"""Run a function over items in forked worker processes, or one call in the background (standard library only).

For CPU-bound work on many files: the workers inherit the parent's memory (no pickling of inputs
beyond the items), results come back in order. One worker, no ``fork`` (Windows, macOS default),
or fewer than two items: a plain loop in this process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

__all__ = ["Item", "Result", "in_background", "map_forked", "workers"]

Item = TypeVar("Item")
Result = TypeVar("Result")

_task: Callable[[object], object] | None = None


def _run(item: object) -> object:
    assert _task is not None
    return _task(item)


def workers() -> int:
    """How many processes to use: ``$JAXREL_WORKERS``, else the CPUs this process may run on, at most 4."""
    chosen = os.environ.get("JAXREL_WORKERS", "")
    if chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    try:
        return max(1, min(4, len(os.sched_getaffinity(0))))
    except AttributeError:  # not on Linux
        return max(1, min(4, os.cpu_count() or 1))


def map_forked(task: Callable[[Item], Result], items: Sequence[Item], processes: int | None = None) -> Iterator[Result]:
    """``task(item)`` for every item, in order, computed by up to ``processes`` forked workers."""
    global _task
    count = workers() if processes is None else processes
    if count < 2 or len(items) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield from (task(item) for item in items)
        return
    _task = task  # type: ignore[assignment]  # inherited by the forked workers
    try:
        # not multiprocessing.Pool: it waits forever for a worker that died (a segfault in a C parser)
        with ProcessPoolExecutor(min(count, len(items)), mp_context=multiprocessing.get_context("fork")) as pool:
            yield from pool.map(_run, items)  # type: ignore[misc]
    except BrokenProcessPool:
        raise RuntimeError("a worker process died (killed, or crashed in native code)") from None
    finally:
        _task = None


def in_background(task: Callable[[], Result]) -> Callable[[], Result]:
    """Start ``task()`` in a daemon thread now; the returned function waits for its result (or raises what it
    raised). For waiting on the network while this thread computes: a caller that stops early (a refusal,
    Ctrl-C) does not wait for it."""
    outcome: list[Result] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(task())
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits for the result
            failure.append(error)

    thread = threading.Thread(target=run, name="background", daemon=True)
    thread.start()

    def result() -> Result:
        thread.join()
        if failure:
            raise failure[0]
        return outcome[0]
    return result
