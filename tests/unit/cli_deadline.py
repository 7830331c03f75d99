"""``jaxrel ARGV`` run in process under a deadline: the one harness of the hostile, boundary and fuzz tests."""

from __future__ import annotations

import signal
from collections.abc import Sequence

from jaxrel.cli import main


class Hung(BaseException):
    """A command ran past its deadline (not an ``Exception``: the command line must not catch it)."""


def run_main(argv: Sequence[str], deadline: int) -> int:
    """The exit code of ``jaxrel ARGV``; :class:`Hung` when it has not returned within ``deadline`` seconds."""

    def hung(signum: int, frame: object) -> None:
        raise Hung(f"no answer within {deadline} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(deadline)
    try:
        return main(list(argv))
    except SystemExit as exit_:  # argparse
        return int(exit_.code or 0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
