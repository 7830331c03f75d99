"""The ``jaxrel`` command: one thin module per verb; each parses, calls the library and prints.

Exit codes (:class:`jaxrel.errors.ExitCode`): 0 compatible / done, 1 incompatible or refused,
2 bad input, 3 the environment or an external service failed, 70 a bug in jaxrel (the
traceback goes to a file, or to stderr with ``--debug`` / ``JAXREL_DEBUG=1``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence

from jaxrel import __version__
from jaxrel._util.text import redact
from jaxrel.cli import bisect, build, compat, doctor, gates, matrix, release, verdict, xla
from jaxrel.cli._common import UsageError
from jaxrel.errors import ExitCode, JaxrelError

__all__ = ["UsageError", "build_parser", "main"]

VERBS = (verdict, doctor, matrix, compat, bisect, gates, build, release, xla)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (the CLI reference in the docs is generated from it)."""
    parser = argparse.ArgumentParser(
        prog="jaxrel", description="Release engineering for split wheels.",
        epilog="exit codes: 0 compatible/done, 1 incompatible or refused, 2 bad input, 3 environment or external "
               "failure, 70 a bug in jaxrel, 130 interrupted")
    parser.add_argument("--version", action="version", version=f"jaxrel {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an unexpected error (also JAXREL_DEBUG=1)")
    verbs = parser.add_subparsers(dest="verb", required=True)
    for module in VERBS:
        module.add(verbs)
    return parser


def _crash_report() -> str:
    """Write the current exception's traceback to a file; its path."""
    handle, path = tempfile.mkstemp(prefix="jaxrel-crash-", suffix=".txt")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(f"jaxrel {__version__}, Python {sys.version.split()[0]}\n{' '.join(sys.argv)}\n\n")
        out.write(traceback.format_exc())
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``jaxrel`` command; the exit code (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    verb = f"release {args.action}" if args.verb == "release" else args.verb
    debug = args.debug or os.environ.get("JAXREL_DEBUG") == "1"
    try:
        return int(args.run(args))
    except JaxrelError as error:
        print(f"jaxrel {verb}: error: {redact(str(error))}", file=sys.stderr)
        return int(error.exit_code)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:  # a path the user gave
        print(f"jaxrel {verb}: error: {error.filename or ''}: {error.strerror or error}; check the path",
              file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    except OSError as error:  # permissions, a full disk, an immutable file: the environment failed
        print(f"jaxrel {verb}: error: {error.filename or ''}: {error.strerror or error}; "
              "check permissions and free space, then run it again", file=sys.stderr)
        return int(ExitCode.ENVIRONMENT)
    except KeyboardInterrupt:
        print(f"jaxrel {verb}: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as error:  # a bug: one line, the traceback in a file
        if debug:
            traceback.print_exc()
            return int(ExitCode.BUG)
        where = _crash_report()
        print(f"jaxrel {verb}: internal error ({type(error).__name__}: {redact(str(error))[:200]}); this is a bug "
              f"in jaxrel: the traceback is in {where} (or rerun with --debug)", file=sys.stderr)
        return int(ExitCode.BUG)


if __name__ == "__main__":
    sys.exit(main())
