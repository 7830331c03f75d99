"""The ``jaxrel`` command: one thin module per verb; each parses, calls the library and prints.

Exit codes (:class:`jaxrel.errors.ExitCode`): 0 compatible / done, 1 incompatible or refused,
2 bad input, 3 the environment or an external service failed, 70 a bug in jaxrel (the
traceback goes to a file, or to stderr with ``--debug`` / ``JAXREL_DEBUG=1``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from typing import TextIO

from jaxrel import __version__
from jaxrel._util import procs, workdirs
from jaxrel._util.shape import printable
from jaxrel._util.text import redact
from jaxrel.cli._common import UsageError
from jaxrel.errors import ExitCode, JaxrelError

__all__ = ["UsageError", "build_parser", "import_verbs", "main"]

# each verb's module, jaxrel.cli.<verb>, in the order of jaxrel --help
VERBS = ("verdict", "doctor", "matrix", "compat", "bisect", "downstream", "atlas", "gates", "build", "release", "xla",
         "history")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line (the CLI reference in the docs is generated from it); with ``only``, that verb alone
    (``""``: none, for ``--version``), which is all a run of it parses: the other verbs' modules, and what they
    import, are not loaded (a third of a second of every start)."""
    parser = argparse.ArgumentParser(
        prog="jaxrel", description="Release engineering for split wheels.",
        epilog="exit codes: 0 compatible/done, 1 incompatible or refused, 2 bad input, 3 environment or external "
               "failure, 70 a bug in jaxrel, 130 interrupted")
    parser.add_argument("--version", action="version", version=f"jaxrel {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an unexpected error (also JAXREL_DEBUG=1)")
    verbs = parser.add_subparsers(dest="verb", required=True)
    for name in _verbs(only):
        importlib.import_module(f"jaxrel.cli.{name}").add(verbs)
    return parser


def _verbs(only: str | None) -> tuple[str, ...]:
    """The verbs whose modules a parser built with ``only`` (see :func:`build_parser`) holds."""
    return VERBS if only is None else tuple(name for name in VERBS if name == only)


def import_verbs(argv: Sequence[str]) -> None:
    """Import the verb modules a run of ``argv`` parses with: ``jaxrel``'s start-up does it under its SIGINT
    handler, as it imports this package, so an interrupt there is its one line too."""
    for name in _verbs(_verb_named(argv)):
        importlib.import_module(f"jaxrel.cli.{name}")


def _verb_named(argv: Sequence[str]) -> str | None:
    """The verb ``argv`` runs, when it names one before any help option (else the whole command line is needed:
    for ``--help``, a mistyped verb's list of choices, or none given); ``""`` for ``--version`` before either,
    which needs no verb."""
    for word in argv:
        if word == "--version":
            return ""
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if word in VERBS else None
    return None


def _one_line(text: str) -> str:
    """``text`` redacted, with every character that is not printable escaped (a line break, a record separator:
    anything ``str.splitlines`` would split on), so an error is exactly one line."""
    return printable(redact(text))


def _crash_report() -> str:
    """Write the current exception's traceback (secrets redacted) to a file; its path."""
    handle, path = tempfile.mkstemp(prefix="jaxrel-crash-", suffix=".txt")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(redact(f"jaxrel {__version__}, Python {sys.version.split()[0]}\n{' '.join(sys.argv)}\n\n"))
        out.write(redact(traceback.format_exc()))
    return path


class _Redacting(io.TextIOBase):
    """A text stream that passes everything written to it through :func:`redact` (jaxrel's stdout and stderr
    while a verb runs: no secret jaxrel knows of reaches the terminal or a CI log through jaxrel)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


@contextlib.contextmanager
def _redacted_output() -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(sys.stdout), _Redacting(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``jaxrel`` command; the exit code (see the module docstring). Everything it prints is redacted."""
    try:
        with _redacted_output(), procs.interrupts_stop_children():
            code = _main(argv)
    except KeyboardInterrupt as stopped:  # while parsing, or between the verb and its error line
        print(f"jaxrel: {_stopped(stopped)}", file=sys.stderr)
        code = int(ExitCode.INTERRUPTED)
    finally:
        workdirs.discard_unused()  # a run that wrote nothing leaves no empty work directory behind
    procs.finish_stopping()  # after an interrupt: every child's SIGKILL sent before jaxrel exits
    return code


def _stopped(stopped: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM); its child processes were stopped" if isinstance(stopped, procs.Terminated) \
        else "interrupted"


def _main(argv: Sequence[str] | None) -> int:
    verb_named = _verb_named(sys.argv[1:] if argv is None else argv)
    parser = build_parser(verb_named) if verb_named is not None else build_parser()
    args = parser.parse_args(argv)
    verb = f"{args.verb} {args.action}" if args.verb in ("release", "history") else args.verb
    debug = args.debug or os.environ.get("JAXREL_DEBUG") == "1"
    try:
        return int(args.run(args))
    except JaxrelError as error:
        print(f"jaxrel {verb}: error: {_one_line(str(error))}", file=sys.stderr)
        return int(error.exit_code)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:  # a path the user gave
        print(_one_line(f"jaxrel {verb}: error: {error.filename or ''}: {error.strerror or error}; check the path"),
              file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    except OSError as error:  # permissions, a full disk, an immutable file: the environment failed
        print(_one_line(f"jaxrel {verb}: error: {error.filename or ''}: {error.strerror or error}; "
                        "check permissions and free space, then run it again"), file=sys.stderr)
        return int(ExitCode.ENVIRONMENT)
    except KeyboardInterrupt as stopped:
        print(f"jaxrel {verb}: {_stopped(stopped)}", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as error:  # a bug: one line, the traceback in a file
        if debug:
            traceback.print_exc()
            return int(ExitCode.BUG)
        where = _crash_report()
        print(f"jaxrel {verb}: internal error ({type(error).__name__}: {_one_line(str(error))[:200]}); this is a bug "
              f"in jaxrel: the traceback is in {where} (or rerun with --debug)", file=sys.stderr)
        return int(ExitCode.BUG)


if __name__ == "__main__":
    sys.exit(main())
