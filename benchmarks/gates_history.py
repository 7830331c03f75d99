"""``jaxrel gates --fix`` on real jax history: where the minimum jaxlib was raised, fix the tree
before the raise with the new minimum, then check it against what the maintainers did by hand.

Run: ``python benchmarks/gates_history.py --repo JAX_GIT_DIR [--point RAISE_COMMIT ...] [--json]``
(a jax clone with history; no work tree needed). For each raise commit R (``git log -p --
jax/version.py``), with M the minimum R declares:

1. ``git archive R^`` exports ``jax/``, ``tests/`` and the test requirements;
2. ``jaxrel gates TREE --min-backend M --fix`` rewrites it (timed; the scan alone timed too);
3. a virtual environment with jaxlib M and jax's test requirements (``uv``, the index as configured
   for uv) imports the fixed tree (``PYTHONPATH``), computes, and runs a selection of jax's own
   tests from outside the tree (``--import-mode=importlib``, ``-p no:cacheprovider``);
4. recall: the gate sites (file, condition) of R^ with a comparison decided under M that the
   maintainers removed or changed by the next raise (inclusive), and how many of those the fix
   removed or changed too; and the fix's removals they did not make.

Prints a Markdown table (or JSON); measured numbers, nothing asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packaging.version import Version

from jaxrel.distributions.pythons import python_for
from jaxrel.family import jax_profile
from jaxrel.gates import judge as gates

# Raise commits of jax's minimum jaxlib (git log -p -- jax/version.py), newest first.
POINTS = ["a1521744c6", "55d755f4d2", "433d98d755", "08a228a948"]
TESTS = ["tests/api_util_test.py", "tests/tree_util_test.py", "tests/config_test.py", "tests/control_deps_test.py",
         "tests/util_test.py", "tests/dtypes_test.py", "tests/xla_transform_test.py"]
REQUIREMENTS = ["ml_dtypes>=0.5.0", "numpy>=2.0", "opt_einsum", "scipy>=1.14", "absl-py", "cloudpickle", "filelock",
                "flatbuffers", "hypothesis==6.142.1", "mpmath==1.3.0", "portpicker", "pytest<9.0", "rich"]
COMPUTE = "import jax, jax.numpy as jnp; print(float(jax.jit(lambda x: (x * x).sum())(jnp.arange(4.0))))"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True).stdout


def minimum_at(repo: Path, commit: str) -> str:
    found = re.search(r"^_minimum_jaxlib_version = ['\"]([^'\"]+)['\"]", git(repo, "show", f"{commit}:jax/version.py"),
                      re.MULTILINE)
    assert found, f"no _minimum_jaxlib_version at {commit}"
    return found.group(1)


def version_at(repo: Path, commit: str) -> str:
    found = re.search(r"^_version = ['\"]([^'\"]+)['\"]", git(repo, "show", f"{commit}:jax/version.py"), re.MULTILINE)
    assert found
    return found.group(1)


def export(repo: Path, commit: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    present = set(git(repo, "ls-tree", "--name-only", commit).split()) | {"build/test-requirements.txt"}
    paths = [p for p in ("jax", "tests", "build/test-requirements.txt", "conftest.py") if p in present]
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", "--format=tar", commit, *paths],
                             capture_output=True, check=True)
    tar = into.with_suffix(".tar")
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as handle:
        handle.extractall(into, filter="data")
    tar.unlink()
    return into


def sites(tree: Path, minimum: str, version: str) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """(every gate site, the sites with a comparison decided under ``minimum``) as (file, condition)."""
    family = jax_profile()
    found, _ = gates.find_gates(tree, family)
    releases = gates.Releases.from_family(family, Version(minimum), Version(version))
    every: Counter[tuple[str, str]] = Counter()
    dead: Counter[tuple[str, str]] = Counter()
    for judgement in gates.judge_all(found, releases):
        key = (judgement.gate.file, " ".join(judgement.gate.source.split()))
        every[key] += 1
        if any(v in ("always-true", "always-false") for v in judgement.comparisons.values()):
            dead[key] += 1
    return every, dead


def environment(workdir: Path, jaxlib: str) -> Path:
    venv = workdir / "envs" / f"jaxlib-{jaxlib}"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run(["uv", "venv", "-q", str(venv), "--python", python_for("3.12").executable], check=True)
        subprocess.run(["uv", "pip", "install", "-q", "--python", str(python), f"jaxlib=={jaxlib}", *REQUIREMENTS],
                       check=True)
    return python


def run_tests(python: Path, tree: Path, workdir: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "JAX_PLATFORMS": "cpu"}
    computed = subprocess.run([str(python), "-c", COMPUTE], capture_output=True, text=True, env=env, cwd=workdir)
    tests = [str(tree / t) for t in TESTS if (tree / t).exists()]
    start = time.perf_counter()
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
                           "-o", "addopts=", *tests], capture_output=True, text=True, env=env, cwd=workdir)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    counts = {key: int(n) for n, key in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", summary)}
    return {"imports_and_computes": computed.stdout.strip() == "14.0", "compute_output": computed.stdout.strip()
            or computed.stderr.strip()[-300:], "tests": [t.removeprefix(str(tree) + "/") for t in tests],
            "summary": summary, "counts": counts, "test_s": round(time.perf_counter() - start, 1)}


def point(repo: Path, raise_commit: str, next_raise: str | None, workdir: Path, run: bool) -> dict[str, Any]:
    before = git(repo, "rev-parse", "--short=10", f"{raise_commit}^").strip()
    minimum, version = minimum_at(repo, raise_commit), version_at(repo, f"{raise_commit}^")
    tree = export(repo, before, workdir / f"fixed-{before}")
    every_before, dead = sites(tree, minimum, version)

    jaxrel = [sys.executable, "-m", "jaxrel", "gates", str(tree), "--min-backend", minimum]
    start = time.perf_counter()
    subprocess.run(jaxrel, capture_output=True, text=True, check=True)
    scan_s = time.perf_counter() - start
    start = time.perf_counter()
    fixed = subprocess.run([*jaxrel, "--fix"], capture_output=True, text=True)
    fix_s = time.perf_counter() - start
    last = fixed.stderr.strip().splitlines()[-1] if fixed.stderr.strip() else ""
    rewritten = int(m.group(1)) if (m := re.search(r"rewrote (\d+) files", last)) else None
    every_fixed, _ = sites(tree, minimum, version)

    end = next_raise or "HEAD"
    later = export(repo, end, workdir / f"later-{end}")
    every_later, _ = sites(later, minimum, version_at(repo, end))
    theirs = {k: n for k, n in dead.items() if every_later[k] < n}  # removed or changed by hand
    ours = {k: n for k, n in dead.items() if every_fixed[k] < n}
    hit = sum(min(n, n - every_fixed[k]) for k, n in theirs.items() if k in ours)
    their_total = sum(n - every_later[k] for k, n in theirs.items())
    extra = sorted(f"{f}: {s}" for (f, s) in ours if (f, s) not in theirs)
    missed = sorted(f"{f}: {s}" for (f, s) in theirs if (f, s) not in ours)
    result: dict[str, Any] = {
        "raise": raise_commit, "before": before, "minimum": minimum, "jax_version": version, "window_end": end,
        "scan_s": round(scan_s, 2), "fix_s": round(fix_s, 2), "files_rewritten": rewritten, "fix_summary": last,
        "decided_sites": sum(dead.values()), "their_removals": their_total, "our_hits": hit,
        "recall": round(hit / their_total, 3) if their_total else None, "ours_not_theirs": extra, "missed": missed,
        "fix_exit": fixed.returncode,
    }
    if run:
        python = environment(workdir, minimum)
        result["fixed"] = run_tests(python, tree, workdir)
        original = export(repo, before, workdir / f"original-{before}")
        result["unfixed"] = run_tests(python, original, workdir)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="a jax git directory with history")
    parser.add_argument("--point", action="append", help="a raise commit (default: four recent raises)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench" / "gates-history")
    parser.add_argument("--no-tests", action="store_true", help="skip the environments and jax's tests")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chosen = args.point or POINTS
    results = []
    for commit in chosen:
        later = [c for c in POINTS if POINTS.index(c) < POINTS.index(commit)] if commit in POINTS else []
        results.append(point(args.repo, commit, later[-1] if later else None, args.workdir, not args.no_tests))
        print(json.dumps(results[-1]), file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("| raise | tree before | new minimum | files rewritten | their removals | recall | not theirs "
          "| tests (fixed) | tests (unfixed) | scan s | fix s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        fixed, unfixed = r.get("fixed", {}), r.get("unfixed", {})
        print(f"| {r['raise']} | {r['before']} | {r['minimum']} | {r['files_rewritten']} | {r['their_removals']} "
              f"| {r['our_hits']}/{r['their_removals']} | {len(r['ours_not_theirs'])} "
              f"| {fixed.get('summary', '-')} | {unfixed.get('summary', '-')} | {r['scan_s']} | {r['fix_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
