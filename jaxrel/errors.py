"""One exception base for jaxrel; each kind of failure carries the exit code that means it.

| code | meaning |
|---|---|
| 0 | compatible / done |
| 1 | incompatible or refused: a verdict, a failed check, a refused upload |
| 2 | bad input: usage, configuration, versions, files |
| 3 | the environment or an external service failed: index, Bazel, compiler, permissions, disk |
| 70 | a bug in jaxrel (the traceback is written to a file) |
| 130 | interrupted (Ctrl-C) |

The command line catches :class:`JaxrelError` once and prints its message on one line.
Standard library only: the runtime gating module raises one of these too.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["BadInput", "EnvironmentFailure", "ExitCode", "JaxrelError", "Refused"]


class ExitCode(IntEnum):
    """What a ``jaxrel`` exit status means; one meaning per code."""

    OK = 0
    REFUSED = 1
    BAD_INPUT = 2
    ENVIRONMENT = 3
    BUG = 70
    INTERRUPTED = 130


class JaxrelError(Exception):
    """Base of every error jaxrel reports to a user; ``exit_code`` says which kind it is.

    A subclass fixes the kind; ``exit_code=`` overrides it for one instance (an error class
    whose causes differ, such as an upload refused by the index or an index not reached).
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class Refused(JaxrelError):
    """Incompatible, or refused by a rule or a check (exit 1)."""

    exit_code = ExitCode.REFUSED


class BadInput(JaxrelError):
    """The user's input is wrong: usage, configuration, a version, a file (exit 2)."""

    exit_code = ExitCode.BAD_INPUT


class EnvironmentFailure(JaxrelError):
    """Something outside jaxrel failed: the index, Bazel, a compiler, permissions, the disk (exit 3)."""

    exit_code = ExitCode.ENVIRONMENT
