"""The history service at a year's scale: 365 nights × 20 cells × 500 tests, ingested night by night.

``python benchmarks/history_year.py [--nights 365] [--cells 20] [--tests 500] [--keep DIR]`` writes one compat
report per night (with compat's own report writer; a few tests fail, break and flake along the year), ingests
them into a fresh store and prints: the seconds of each tenth night's ingest and the slowest, the time of
``history query`` (in process, median of 20, and as a command), of ``history publish`` for the whole year, and
the HUD's first contentful paint in headless Chromium (the page's own ``PerformanceObserver`` reading, copied
into the DOM that ``--dump-dom`` prints). Targets: one night ≤ 2 s, query ≤ 50 ms, publish ≤ 20 s, first paint
≤ 1 s.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix, Outcome, Purpose
from jaxrel.cells.suites import TestCounts
from jaxrel.compat.report import to_json
from jaxrel.compat.result import CellResult
from jaxrel.compat.triage import Failure
from jaxrel.history import ingest, publish, query
from jaxrel.history.store import open_store


def night_report(night: int, cells: int, tests: int) -> dict[str, object]:
    made, results = [], []
    names = [f"tests/test_{t // 50:02d}.py::test_case_{t:04d}" for t in range(tests)]
    for c in range(cells):
        backend = f"0.{4 + c // 4}.{c % 4}"
        cell = Cell(f"py3.12-jaxlib{backend}", "3.12", backend, (), Purpose.ADMITTED, Outcome.ACCEPTED)
        if c == cells - 1 and night % 90 > 60:
            continue  # a cell that comes and goes
        made.append(cell)
        outcomes = {name: "passed" for name in names}
        failures = []
        if (night // 30) % 3 == 1 and c % 5 == 0:  # a break that lasts a month, every three months
            broken = names[(night // 30) % tests]
            outcomes[broken] = "failed"
            failures.append(Failure("compat suite", broken, "failed", f"AssertionError at 0x{night:x}",
                                    "compat regression"))
        if (night * 7 + c) % 37 == 0:
            flaky = names[(night + c) % tests]
            outcomes[flaky] = "failed"
            failures.append(Failure("compat suite", flaky, "failed", "TimeoutError", "flaky", "passed on rerun"))
        result = CellResult(cell, Outcome.ACCEPTED, True, 30.0, tests=TestCounts(passed=tests), outcomes=outcomes,
                            failures=failures,
                            wheels={f"jaxlib-{backend}-cp312-cp312-manylinux_2_27_x86_64.whl": f"{c:064x}"})
        result.settle()
        results.append(result)
    matrix = Matrix("jax", FrontendSpec("jax", "0.13.0.dev0", "0.4.0", "source jax"), "jaxlib", made)
    return to_json(matrix, results, frontend={"commit": f"{night:08x}" + "0" * 32, "dirty": False})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--keep", type=Path, help="keep the store and the site here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="jaxrel-history-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "history.sqlite"
    db.unlink(missing_ok=True)
    store = open_store(db)
    seconds = []
    report = work / "report.json"
    for night in range(args.nights):
        report.write_text(json.dumps(night_report(night, args.cells, args.tests)))
        date = time.strftime("%Y-%m-%d", time.gmtime(1735689600 + night * 86400))
        started = time.perf_counter()
        ingest.ingest(store, report, night=date, machine="bench")
        seconds.append(time.perf_counter() - started)
        if night % max(1, args.nights // 10) == 0 or night == args.nights - 1:
            print(f"night {night + 1:3d}/{args.nights}: ingest {seconds[-1]:.2f} s "
                  f"({args.cells * (args.tests + 1)} results)", flush=True)
    rows = store.rows("SELECT COUNT(*) FROM results")[0][0]
    kept = store.rows("SELECT COUNT(*) FROM selections")[0][0] if store.rows(
        "SELECT 1 FROM sqlite_master WHERE name = 'selections'") else 0  # schema 5 on; none before
    ingested = args.nights * args.cells * (args.tests + 1)  # less the nights a cell sat out
    print(f"ingest of one night: median {statistics.median(seconds):.2f} s, slowest {max(seconds):.2f} s "
          f"(target 2 s); about {ingested} results ingested, {rows} kept as rows and {kept} distinct selections, "
          f"store {db.stat().st_size / 1e6:.0f} MB (target 150 MB)")
    pins = query.parse_pins(["jax==0.13.0.dev0", "jaxlib==0.5.1"])
    times = []
    for _ in range(20):
        started = time.perf_counter()
        answer = query.query(store, pins)
        times.append(time.perf_counter() - started)
    print(f"query (in process): median {statistics.median(times) * 1000:.1f} ms (target 50 ms): {answer.verdict}, "
          f"{len(answer.nights)} nights of evidence")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jaxrel", "history", "query", "--db", str(db), "jax==0.13.0.dev0",
                           "jaxlib==0.5.1"], capture_output=True, text=True, cwd=ROOT)
    print(f"query (the command, interpreter start included): {time.perf_counter() - started:.2f} s, exit "
          f"{done.returncode}")
    site = work / "site"
    shutil.rmtree(site, ignore_errors=True)
    started = time.perf_counter()
    files = publish.publish(store, site)
    print(f"publish of the year: {time.perf_counter() - started:.1f} s (target 20 s), {len(files)} files, index "
          f"{(site / 'index.html').stat().st_size / 1e6:.1f} MB")
    store.close()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        probe = ("<script>new PerformanceObserver(l=>{for(const e of l.getEntries()){if(e.name==="
                 "'first-contentful-paint'){document.documentElement.setAttribute('data-fcp',e.startTime.toFixed(1));"
                 "}}}).observe({type:'paint',buffered:true});</script>")
        timed = site / "first-paint.html"
        timed.write_text((site / "index.html").read_text().replace("<body>", "<body>" + probe, 1))
        paints = []
        for _ in range(5):
            dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                                  "--dump-dom", timed.as_uri()], capture_output=True, text=True, timeout=300).stdout
            found = re.search(r'data-fcp="([0-9.]+)"', dom)
            if found:
                paints.append(float(found.group(1)))
        if paints:
            print(f"HUD first contentful paint in headless Chromium: median {statistics.median(paints):.0f} ms "
                  f"(target 1000 ms), {len(paints)} loads")
        else:  # headless Chromium reports no paint for a page that loads before its first frame (a tiny one)
            print("HUD first contentful paint: none observed (the page loaded before headless Chromium painted)")
    print(f"kept in {work}" if args.keep else "")


if __name__ == "__main__":
    main()
