"""The index client on the real index: ``release audit`` cold, this tree beside another revision, in one run.

``python benchmarks/index_client.py [--against REV] [--rounds N] [--since V]`` runs
``jaxrel release audit --family jax --since V --json`` with an empty cache (``JAXREL_CACHE_DIR`` in a
fresh directory), alternating this checkout and ``REV`` (checked out with ``git worktree`` into a
temporary directory), and prints for each round the seconds, the requests the audit counted and
whether the findings agree. Needs the index (pip's configuration); the machine's noise is why the
rounds alternate and the ratio is printed beside the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from _worktree import worktree

ROOT = Path(__file__).resolve().parents[1]


def audit(tree: Path, since: str) -> tuple[float, int, list[str]]:
    """Seconds, requests and findings of one cold audit run from ``tree``."""
    with tempfile.TemporaryDirectory(prefix="jaxrel-bench-cache-") as cache:
        env = {**os.environ, "JAXREL_CACHE_DIR": cache, "PYTHONPATH": str(tree)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "audit", "--family", "jax", "--since",
                               since, "--json"], capture_output=True, text=True, env=env, cwd=cache, timeout=900)
        seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{tree}: the audit failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    result = json.loads(done.stdout)
    findings = sorted(f"{r['version']}: {json.dumps(f, sort_keys=True)}" for r in result["releases"]
                      for f in r["findings"])
    return seconds, int(result.get("requests", -1)), findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="another revision to run beside this tree (git worktree)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--since", default="0.4.30")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jaxrel-bench-tree-") as scratch, ExitStack() as stack:
        trees = {"this tree": ROOT}
        if args.against:
            trees[args.against] = stack.enter_context(worktree(args.against, Path(scratch) / "tree"))
        runs: dict[str, list[tuple[float, int, list[str]]]] = {name: [] for name in trees}
        for number in range(args.rounds):
            for name, tree in trees.items():
                seconds, requests, findings = audit(tree, args.since)
                runs[name].append((seconds, requests, findings))
                print(f"round {number + 1}  {name:>12}: {seconds:6.1f} s cold, {requests} requests, "
                      f"{len(findings)} findings", flush=True)
    base = min(seconds for seconds, _, _ in runs["this tree"])
    for name, measured in runs.items():
        best = min(seconds for seconds, _, _ in measured)
        same = all(found == runs["this tree"][0][2] for _, _, found in measured)
        print(f"{name:>12}: best {best:.1f} s ({best / base:.2f}x this tree), findings "
              f"{'the same' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
