"""The main job's first run on a machine with nothing cached: ``python -m nox -s compat`` with a new, empty HOME.

``python benchmarks/compat_fresh_home.py [--revision REV] [--keep]`` checks ``REV`` (default ``HEAD``) out with
``git worktree`` into a new temporary directory and runs the README's first command there with ``HOME`` (and with
it uv's, pip's, Bazel's, bazelisk's and jaxrel's caches) pointing at an empty directory beside it. Nothing a run
leaves is reused: every wheel is downloaded, the Bazel output base and its toolchains start empty, the frontend is
built from its sdist. What stays is what a machine has rather than caches: the interpreters (pyenv's, found
through ``PYENV_ROOT``), pip's own configuration outside HOME, and the build tools the set-up script installs
system-wide, and Zig's cache (``$TMPDIR/jaxrel-zig-cache``: the libc++ a link needs, compiled once per machine,
about a minute of one core): ``--empty-zig-cache`` moves it aside for the run and back after, a machine's very
first build. It prints the wall time, nox's own time per command, and each cell's line; ``--keep`` keeps the
directory (its path is printed). Exit status 1 when the run fails. Needs the index (pip's configuration).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _worktree import worktree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revision", default="HEAD")
    parser.add_argument("--keep", action="store_true", help="keep the temporary HOME and tree")
    parser.add_argument("--empty-zig-cache", action="store_true", help="run with Zig's cache moved aside")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="jaxrel-fresh-home-"))
    home = base / "home"
    home.mkdir()
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("XDG_", "JAXREL_", "UV_CACHE", "PIP_CACHE", "NOX_"))}
    environment.update(HOME=str(home), PYENV_ROOT=os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv"))
    zig_cache = Path(os.environ.get("TMPDIR") or "/tmp") / "jaxrel-zig-cache"
    aside = zig_cache.with_name(f"{zig_cache.name}.aside-{os.getpid()}")
    if args.empty_zig_cache and zig_cache.exists():
        zig_cache.rename(aside)
    try:
        with worktree(args.revision, base / "tree") as tree:
            started = time.perf_counter()
            with subprocess.Popen([sys.executable, "-m", "nox", "-s", "compat"], cwd=tree, env=environment,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
                assert process.stdout is not None
                deadline = threading.Timer(3600, process.kill)  # a run that hangs ends, and fails
                deadline.start()
                printed = [(time.perf_counter() - started, line.rstrip()) for line in process.stdout]
                deadline.cancel()
            seconds = time.perf_counter() - started
            stamps = [f"{at:6.1f} s  {line[:150]}" for at, line in printed if KEPT.match(line)]
            if args.keep:
                shutil.copytree(tree / "build" / "compat", base / "compat-report", dirs_exist_ok=True)
    finally:
        if aside.exists():
            shutil.rmtree(zig_cache, ignore_errors=True)
            aside.rename(zig_cache)
        if not args.keep:
            subprocess.run(["chmod", "-R", "u+w", str(base)], capture_output=True)  # Bazel's read-only outputs
            shutil.rmtree(base, ignore_errors=True)
    fresh = "HOME and Zig cache" if args.empty_zig_cache else "HOME"
    print(f"fresh {fresh}, {args.revision}: nox -s compat {'passed' if process.returncode == 0 else 'FAILED'} "
          f"in {seconds:.1f} s (load {os.getloadavg()[0]:.2f})")
    for line in stamps:
        print("  " + line)
    if args.keep:
        print(f"kept: {base}")
    if process.returncode != 0:
        raise SystemExit(f"exit {process.returncode}: {' / '.join(line for _, line in printed[-8:])}")


# the lines printed with the time they came at: nox's commands, jaxrel's frontend and extension, each cell's start
KEPT = re.compile(r"^(nox > |extension: |compat: |\[\d+/\d+\] \S+: )")


if __name__ == "__main__":
    main()
