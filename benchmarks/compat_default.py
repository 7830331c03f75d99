"""The main job end to end, warm: ``python -m nox -s compat`` in this tree beside another revision, in turn.

``python benchmarks/compat_default.py [--against REV] [--rounds N] [--warmup N] [--readme-line]`` runs
the README's first command (its built-in default; with ``--readme-line``, the line's ``pip install nox
uv`` too) in this checkout and, with ``--against``, in ``REV`` checked out with ``git worktree`` into
``build/bench/compat-default/`` (each tree keeps its own work directory, Bazel output and bytecode),
first ``--warmup`` times each untimed, then ``--rounds`` times each, alternating, so both see the same
minutes of this noisy machine. It prints each round's wall time with the load average, then each
tree's best and median and their ratio to this tree's. Needs the index (pip's configuration), nox and
uv for this interpreter, and Bazel's tools (``scripts/install_build_tools.sh``, which the session
runs). Exit status 1 when a run fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from _worktree import worktree

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "bench" / "compat-default"


def compat(tree: Path, readme_line: bool = False) -> float:
    """Seconds of one ``nox -s compat`` in ``tree`` (with ``readme_line``, of the README's whole line: the
    ``pip install nox uv`` before it too); exits when it fails."""
    started = time.perf_counter()
    if readme_line:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "nox", "uv"], cwd=tree, capture_output=True,
                             text=True, timeout=600)
        if pip.returncode != 0:
            raise SystemExit(f"pip install nox uv failed (exit {pip.returncode}): {pip.stderr.strip()[-600:]}")
    done = subprocess.run([sys.executable, "-m", "nox", "-s", "compat"], cwd=tree, capture_output=True, text=True,
                          timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{tree}: nox -s compat failed (exit {done.returncode}): {done.stdout.strip()[-600:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="another revision to run beside this tree (git worktree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of each tree first (default 1)")
    parser.add_argument("--readme-line", action="store_true",
                        help="time the README's whole line, python -m pip install nox uv before nox")
    args = parser.parse_args()
    with ExitStack() as stack:
        trees = {"this tree": ROOT}
        if args.against:
            trees[args.against] = stack.enter_context(worktree(args.against, WORK / "tree"))
        for name, tree in trees.items():
            for number in range(args.warmup):
                print(f"warm-up {number + 1} {name:>12}: {compat(tree, args.readme_line):6.1f} s", flush=True)
        runs: dict[str, list[float]] = {name: [] for name in trees}
        for number in range(args.rounds):
            for name, tree in trees.items():
                runs[name].append(compat(tree, args.readme_line))
                print(f"round {number + 1}  {name:>12}: {runs[name][-1]:6.1f} s  load {os.getloadavg()[0]:.2f}",
                      flush=True)
    base = min(runs["this tree"])
    for name, measured in runs.items():
        best = min(measured)
        print(f"{name:>12}: best {best:.1f} s, median {statistics.median(measured):.1f} s "
              f"({best / base:.2f}x this tree's best)")


if __name__ == "__main__":
    main()
