"""How long ``jaxrel gates`` takes on a real frontend: the scan, and the fix, of a whole jax tree.

Run: ``python benchmarks/gates.py [--tree DIR] [--fix-min-backend V] [--repeat N] [--json]`` (or
``nox -s bench -- gates``). Without ``--tree`` the newest jax release's sdist comes through jaxrel's
index client (sha256-verified, cached) and is unpacked once under ``build/bench/gates/``; a jax
checkout (``jax/`` and ``tests/``) is the harder case. Each round, in this process, times:

1. the scan (:func:`jaxrel.gates.judge.find_gates`: every ``.py`` file read, candidates parsed with
   ``ast``; files whose syntax this interpreter cannot parse re-read by the newest Python here);
2. the judgement of every gate over the supported releases;
3. both together, as ``jaxrel gates SRC`` spends them (the CLI adds its own start-up);
4. the fix with the minimum raised to ``--fix-min-backend`` (default: the newest release the tree
   supports, so every gate it can decide is decided): :func:`jaxrel.gates.fix.fix_tree`, the
   rewrite and its verification, nothing written; and scan + fix, as ``jaxrel gates SRC --fix``.

Prints min and median per step; the targets (scan under 3 s, scan + fix under 10 s on this
machine) are printed beside the measured numbers, not asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packaging.version import Version  # noqa: E402

from jaxrel import policy
from jaxrel.distributions.index import Index  # noqa: E402
from jaxrel.family import jax_profile  # noqa: E402
from jaxrel.gates import find as gatefind
from jaxrel.gates import judge as gates  # noqa: E402
from jaxrel.gates import report as gatereport

TARGET_S = 3.0
FIX_TARGET_S = 10.0


def newest_sdist_tree(workdir: Path) -> Path:
    """The newest jax release's sdist, unpacked under ``workdir`` (reused while present)."""
    listing = Index.from_pip().listing("jax")
    finals = [v for v in listing.versions() if policy.is_final(v) and listing.sdist(v)]
    sdist = listing.sdist(finals[-1])
    assert sdist is not None
    tree = workdir / sdist.filename.removesuffix(".tar.gz")
    if not tree.is_dir():
        print(f"unpacking {sdist.filename} …", file=sys.stderr)
        with tarfile.open(Index.from_pip().download(sdist)) as archive:
            archive.extractall(workdir, filter="data")
    return tree


def measure(tree: Path, repeat: int, fix_minimum: str | None = None) -> dict[str, Any]:
    from jaxrel.gates import fix as gatefix

    family = jax_profile()
    minimum, version, _ = gatereport.declared_minimum(tree, family)
    releases = gates.Releases.from_family(family, Version(minimum), Version(version) if version else None)
    raised_to = fix_minimum or releases.supported[-1]
    raised = gates.Releases.from_family(family, Version(raised_to), Version(version) if version else None)
    scans, judges, totals, fixes, scan_fix = [], [], [], [], []
    found: list[gates.Gate] = []
    failed: dict[str, str] = {}
    rewritten = 0
    for number in range(repeat):
        start = time.perf_counter()
        texts: dict[str, str] = {}
        found, failed = gates.find_gates(tree, family, texts)
        scanned = time.perf_counter()
        judgements = gates.judge_all(found, releases)
        done = time.perf_counter()
        fixed = gatefix.fix_tree(tree, gates.judge_all(found, raised), texts=texts)
        fixed_at = time.perf_counter()
        rewritten = len(fixed.changed)
        scans.append(scanned - start)
        judges.append(done - scanned)
        totals.append(done - start)
        fixes.append(fixed_at - done)
        scan_fix.append(scanned - start + fixed_at - done)
        print(f"round {number + 1}/{repeat}: scan {scans[-1]:.2f} s, fix {fixes[-1]:.2f} s", file=sys.stderr)
    files = sum(1 for _ in gatefind.python_files(str(tree)))
    return {
        "tree": str(tree), "python_files": files, "gates": len(found), "unparsed": failed,
        "counts": gatereport.counts(judgements), "python": sys.version.split()[0],
        "scan_s": {"min": min(scans), "median": statistics.median(scans)},
        "judge_s": {"min": min(judges), "median": statistics.median(judges)},
        "total_s": {"min": min(totals), "median": statistics.median(totals), "all": totals},
        "target_s": TARGET_S, "met": statistics.median(totals) < TARGET_S,
        "fix_min_backend": raised_to, "files_rewritten": rewritten,
        "fix_s": {"min": min(fixes), "median": statistics.median(fixes), "all": fixes},
        "scan_fix_s": {"min": min(scan_fix), "median": statistics.median(scan_fix), "all": scan_fix},
        "fix_target_s": FIX_TARGET_S, "fix_met": statistics.median(scan_fix) < FIX_TARGET_S,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="a jax tree (default: the newest jax sdist)")
    parser.add_argument("--fix-min-backend", help="the raised minimum the fix is timed with")
    parser.add_argument("--workdir", default=str(ROOT / "build" / "bench" / "gates"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    result = measure(args.tree or newest_sdist_tree(workdir), args.repeat, args.fix_min_backend)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['tree']}: {result['python_files']} .py files, {result['gates']} gates {result['counts']}; "
          f"Python {result['python']}")
    print(f"{'step':<24}{'min':>8}{'median':>9}")
    for key, label in (("scan_s", "scan (find_gates)"), ("judge_s", "judge all gates"), ("total_s", "scan + judge"),
                       ("fix_s", "fix (fix_tree)"), ("scan_fix_s", "scan + fix")):
        print(f"{label:<24}{result[key]['min']:>8.2f}{result[key]['median']:>9.2f}  s")
    verdict = "met" if result["met"] else "NOT met"
    print(f"target: full scan under {TARGET_S:.0f} s: {verdict}")
    print(f"fix with minimum {result['fix_min_backend']}: {result['files_rewritten']} files rewritten; target: "
          f"scan + fix under {FIX_TARGET_S:.0f} s: {'met' if result['fix_met'] else 'NOT met'}")
    if result["unparsed"]:
        print(f"not scanned: {', '.join(result['unparsed'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
