"""``--jobs N``: a Crater's libraries run N at once on one machine, as memory allows.

Each library is expected to take its last passing run's peak memory (from the history store; a flat guess for one
never measured) and its time. The scheduler starts the longest first, and starts another only while the peaks
expected of those running plus its own fit in the memory the machine had available when the Crater began (one
runs whatever it needs: a library larger than the machine still runs, alone). Results come back in the items' order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["DEFAULT_PEAK", "Job", "available_memory", "run_jobs"]

DEFAULT_PEAK = 2 << 30  # bytes: a library never measured (most suites of the ecosystem peak below it on CPU)
Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class Job(Generic[Item]):
    """One item with what it is expected to take."""

    item: Item
    seconds: float
    peak_bytes: int


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` in bytes (Linux); ``None`` where it cannot be read."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def run_jobs(jobs: Sequence[Job[Item]], work: Callable[[Item], Result], at_once: int, capacity: int | None,
             started: Callable[[Item, int], None] = lambda item, running: None) -> list[Result]:
    """``work(job.item)`` for each job, at most ``at_once`` together, the longest first, each started only while the
    peaks of those running plus its own fit in ``capacity`` bytes (``None``: no memory bound), or when none runs.
    ``started(item, running)`` is told of each start. The first exception raised by a job is raised once every
    started job has ended; nothing starts after it."""
    order = sorted(range(len(jobs)), key=lambda i: (-jobs[i].seconds, i))
    results: dict[int, Result] = {}
    errors: list[BaseException] = []
    running: dict[int, int] = {}  # index → its reserved bytes
    changed = threading.Condition()

    def fits(index: int) -> bool:
        if not running:
            return True
        if len(running) >= max(1, at_once):
            return False
        return capacity is None or sum(running.values()) + jobs[index].peak_bytes <= capacity

    def one(index: int) -> None:
        try:
            value = work(jobs[index].item)
            with changed:
                results[index] = value
        except BaseException as error:  # noqa: BLE001 (handed to the caller, Ctrl-C included)
            with changed:
                errors.append(error)
        finally:
            with changed:
                running.pop(index, None)
                changed.notify_all()

    threads = []
    with changed:
        for index in order:
            def ready(index: int = index) -> bool:
                return bool(errors) or fits(index)

            changed.wait_for(ready)
            if errors:
                break
            running[index] = jobs[index].peak_bytes
            started(jobs[index].item, len(running))
            thread = threading.Thread(target=one, args=(index,), name=f"crater-job-{index}", daemon=True)
            threads.append(thread)
            thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [results[i] for i in range(len(jobs))]
