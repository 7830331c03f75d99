"""The ``jaxrel`` console script and ``python -m jaxrel``: Ctrl-C at any moment, start-up included, is one line
and exit 130.

Importing the command line (the verb's module, ``packaging``, …) takes a noticeable moment; an interrupt
then would otherwise end in a ``KeyboardInterrupt`` traceback. Until the command line is imported,
SIGINT ends the process at once with the one line; from then on :func:`jaxrel.cli.main` handles it
(children stopped, nothing half written).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import FrameType

__all__ = ["main"]

INTERRUPTED = 130
LINGER = 5.0  # seconds an interrupted run waits for its worker threads before it exits anyway


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"jaxrel: interrupted\n")
    os._exit(INTERRUPTED)


def main() -> None:
    previous = signal.signal(signal.SIGINT, _interrupted_while_starting)
    from jaxrel.cli import import_verbs  # imported under the start-up handler, on purpose
    from jaxrel.cli import main as run

    import_verbs(sys.argv[1:])  # the verb's module too

    signal.signal(signal.SIGINT, previous)
    code = run()
    # Done: a Ctrl-C while the interpreter exits (joining threads, running atexit) ends it at once, the Unix way,
    # rather than as a KeyboardInterrupt traceback after the command's answer.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if code == INTERRUPTED:
        _leave_interrupted()
    sys.exit(code)


def _leave_interrupted() -> None:
    """Exit 130 now that every child is stopped: worker threads get a moment to finish what they were writing (each
    write is atomic), but the interpreter does not wait for one still reading the network (a pool's threads are
    joined at exit)."""
    deadline = time.monotonic() + LINGER
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)
