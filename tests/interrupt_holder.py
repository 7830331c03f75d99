"""A child that holds until an interrupt reaches it, of one of three kinds: the interrupt tests put it where a
phase of a verb starts its child (``JAXREL_TEST_HOLD``), or a test's own verb runs it.

``python interrupt_holder.py KIND DIR [the command it stands in for…]``: it appends its pid to ``DIR/pids`` (and
any process it starts), then creates ``DIR/held-PID`` and holds, at most ten minutes:

- ``honours``: SIGINT ends it (Python's default);
- ``ignores``: it ignores SIGINT and SIGTERM (only SIGKILL ends it);
- ``own-session``: it starts a grandchild in a session of its own that ignores SIGINT and SIGTERM (out of reach of
  a signal to its process group), then holds, ignoring both itself;
- ``honours+own-session``, ``ignores+own-session``: the first two, each with such a grandchild (a build backend
  that uv started in a session of its own, under a child that honours or ignores SIGINT).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("honours", "ignores", "own-session", "honours+own-session", "ignores+own-session")
HOLD_SECONDS = 600
_STUBBORN = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n")


def main() -> None:
    kind, where = sys.argv[1], Path(sys.argv[2])
    child, _, grandchild = kind.partition("+")
    pids = [os.getpid()]
    if child in ("ignores", "own-session"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "own-session" in (child, grandchild):
        pids.append(subprocess.Popen([sys.executable, "-c", _STUBBORN], start_new_session=True).pid)
    with open(where / "pids", "a") as out:
        out.write("".join(f"{pid}\n" for pid in pids))
    (where / f"held-{os.getpid()}").touch()
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
