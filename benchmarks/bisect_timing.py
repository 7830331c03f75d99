"""What one ``jaxrel bisect`` step costs on real jax, and what a whole bisection over ~500 commits costs.

Run (from any directory): ``python benchmarks/bisect_timing.py steps --frontend-src CHECKOUT [--revisions K]``,
``python benchmarks/bisect_timing.py run --frontend-src CHECKOUT --good REV --bad REV [--cell ID]
[--frontend-tests T ...]`` and ``python benchmarks/bisect_timing.py against --frontend-src LAB --against REV``
(this code's cold bisection beside REV's, in turn, split into phases), or ``nox -s bench -- bisect_timing
steps|run|against ...``. The checkout is the bisect
lab ``scripts/make_bisect_lab.py`` makes (real jax history, one regression inserted), or any jax
git checkout.

``steps``: for K revisions spread over ``--range`` (``GOOD..BAD``), the ways to get one revision
of jax from git into an existing Python 3.12 environment that holds jaxlib, each timed in the same
minutes (this machine is shared and noisy), side by side:

- export: ``git archive REV PATHS`` extracted with :mod:`tarfile` (what the step does), or the
  same paths read into a throwaway index and written with ``git checkout-index``;
- build: ``uv build --wheel`` (an isolated build environment, uv-cached), the same with
  ``--no-build-isolation`` in a build environment made once (setuptools, wheel), ``pip wheel
  --no-build-isolation --no-deps`` there, or setuptools' PEP 517 hook called directly there;
- install: ``uv pip install --no-deps --reinstall-package jax --refresh-package jax WHEEL``;
  or both in one: ``uv pip install ... DIR``.

Each way is checked, not only timed: after the install, the environment's ``jax/_src/api_util.py``
and ``jax/version.py`` ``_version`` must be the revision's (else the row says ``WRONG``).

``run``: ``jaxrel bisect ... --json`` once (wheels cold) and again over the same range (every
wheel cached by tree hash), and prints steps against ⌈log2 N⌉ + 2, seconds per step split into
export / build+install / tests, and the total against the 5-minute target.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, where its name would shadow the
# standard library's ``bisect`` (which ``statistics`` and ``random`` import): take it off.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import io
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import tarfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.distributions.pipconfig import pip_index_config  # noqa: E402
from jaxrel.distributions.pythons import python_for  # noqa: E402

WORK = ROOT / "build" / "bench" / "bisect"
BUILD_PATHS = ("jax", "setup.py", "pyproject.toml", "README.md")
STEP_TARGET = 6.0  # seconds: export + build + install
RUN_TARGET = 300.0  # seconds: a 500-commit range, warm, two tests


def sh(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
       stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, input=stdin, timeout=900,
                          env={**os.environ, **uv_env(), **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"bisect bench: {' '.join(map(str, command[:4]))} … exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[-600:]}")
    return done


_UV_ENV: dict[str, str] = {}


def python312() -> str:
    """jax HEAD needs Python >= 3.12: the interpreter jaxrel would pick for a py3.12 cell."""
    return python_for("3.12").executable


def uv_env() -> dict[str, str]:
    if not _UV_ENV:
        _UV_ENV.update(pip_index_config().uv_environment())
    return _UV_ENV


def timed(action: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, of the processes it ran) of ``action``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = time.process_time()
    start = time.perf_counter()
    action()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + time.process_time() - cpu_before
    return wall, cpu


def median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


# --- export ---------------------------------------------------------------------------------------

def export_archive(git_dir: Path, rev: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    done = sh(["git", "--git-dir", str(git_dir), "archive", "--format=tar", rev, "--", *BUILD_PATHS])
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(dest, filter="tar")


def export_checkout_index(git_dir: Path, rev: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    env = {"GIT_INDEX_FILE": str(dest.parent / f"{dest.name}.index")}
    git = ["git", "--git-dir", str(git_dir)]
    sh([*git, "read-tree", "--empty"], env=env)
    for path in BUILD_PATHS:
        kind = sh([*git, "cat-file", "-t", f"{rev}:{path}"]).stdout.decode().strip()
        if kind == "tree":
            sh([*git, "read-tree", f"--prefix={path}/", f"{rev}:{path}"], env=env)
        else:
            blob = sh([*git, "rev-parse", f"{rev}:{path}"]).stdout.decode().strip()
            sh([*git, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], env=env)
    sh([*git, "checkout-index", "--all", f"--prefix={dest}/"], env=env)
    Path(env["GIT_INDEX_FILE"]).unlink()


EXPORTS = {"git archive + tarfile": export_archive, "read-tree + checkout-index": export_checkout_index}


# --- build and install ----------------------------------------------------------------------------

def one_wheel(out: Path) -> Path:
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"bisect bench: {out}: {len(wheels)} wheels, expected one")
    return wheels[0]


def install_wheel(env_python: Path, out: Path) -> None:
    wheel = one_wheel(out)
    sh(["uv", "pip", "install", "--quiet", "--python", str(env_python), "--no-deps",
        "--reinstall-package", "jax", "--refresh-package", "jax", str(wheel)])


def builders(build_python: Path) -> dict[str, Callable[[Path, Path], None]]:
    """Ways to build ``src``'s wheel into ``out``."""
    def uv_build(src: Path, out: Path) -> None:
        sh(["uv", "build", "--wheel", "--quiet", "--python", python312(), "--out-dir", str(out), str(src)])

    def uv_build_no_isolation(src: Path, out: Path) -> None:
        sh(["uv", "build", "--wheel", "--quiet", "--no-build-isolation", "--python", str(build_python),
            "--out-dir", str(out), str(src)])

    def pip_wheel(src: Path, out: Path) -> None:
        sh([str(build_python), "-m", "pip", "wheel", "--quiet", "--no-build-isolation", "--no-deps",
            "--wheel-dir", str(out), str(src)])

    def pep517_hook(src: Path, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        sh([str(build_python), "-c", "import sys; from setuptools import build_meta as b; b.build_wheel(sys.argv[1])",
            str(out)], cwd=src)

    return {"uv build (isolated)": uv_build, "uv build --no-build-isolation": uv_build_no_isolation,
            "pip wheel --no-build-isolation": pip_wheel, "setuptools build_wheel hook": pep517_hook}


def installed_matches(env_python: Path, src: Path) -> bool:
    """Whether the environment's jax is ``src``'s: the same api_util.py and the same ``_version``."""
    site = sh([str(env_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    installed = Path(site.decode().strip()) / "jax"
    ours = (src / "jax" / "_src" / "api_util.py").read_bytes()
    version = re.compile(r'^_version\s*=\s*"([^"]+)"', re.M)
    want = version.search((src / "jax" / "version.py").read_text())
    got = version.search((installed / "version.py").read_text())
    return (installed / "_src" / "api_util.py").read_bytes() == ours and bool(want and got and want[1] == got[1])


def prepare_envs(jaxlib: str) -> tuple[Path, Path]:
    """The cell-like environment (jaxlib and jax's runtime deps) and a build environment (setuptools, wheel, pip)."""
    env, build_env = WORK / "env", WORK / "build-env"
    for root, packages in ((env, [f"jaxlib=={jaxlib}", "opt_einsum"]), (build_env, ["setuptools", "wheel", "pip"])):
        if not (root / "bin" / "python").exists():
            sh(["uv", "venv", "--quiet", "--python", python312(), str(root)])
            sh(["uv", "pip", "install", "--quiet", "--python", str(root / "bin" / "python"), *packages])
    return env / "bin" / "python", build_env / "bin" / "python"


def revisions(git_dir: Path, span: str, count: int) -> list[str]:
    listed = sh(["git", "--git-dir", str(git_dir), "rev-list", "--first-parent", span]).stdout.decode().split()
    if not listed:
        raise SystemExit(f"bisect bench: {span}: no commits")
    return [listed[round(i * (len(listed) - 1) / max(count - 1, 1))] for i in range(count)]


def git_dir_of(checkout: Path) -> Path:
    done = sh(["git", "-C", str(checkout), "rev-parse", "--absolute-git-dir"])
    return Path(done.stdout.decode().strip())


def steps(args: argparse.Namespace) -> int:
    git_dir = git_dir_of(args.frontend_src)
    env_python, build_python = prepare_envs(args.jaxlib)
    revs = revisions(git_dir, args.range, args.revisions)
    export_times: dict[str, list[tuple[float, float]]] = {name: [] for name in EXPORTS}
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
    wrong: set[str] = set()
    scratch = WORK / "scratch"
    load_before = os.getloadavg()
    for rev in revs:
        for name, export in EXPORTS.items():
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            export_times[name].append(timed(partial(export, git_dir, rev, scratch / "src")))
        ways: dict[str, Callable[[Path, Path], None] | None] = dict(builders(build_python))
        ways["uv pip install DIR (build + install)"] = None
        for name, build in ways.items():
            src = scratch / "fresh"
            shutil.rmtree(src, ignore_errors=True)
            shutil.copytree(scratch / "src", src)
            out = scratch / "out"
            shutil.rmtree(out, ignore_errors=True)
            row = rows.setdefault(name, {"build": [], "install": []})
            if build is not None:
                row["build"].append(timed(partial(build, src, out)))
                row["install"].append(timed(partial(install_wheel, env_python, out)))
            else:
                row["build"].append(timed(partial(sh, ["uv", "pip", "install", "--quiet", "--python", str(env_python),
                                                       "--no-deps", "--reinstall-package", "jax",
                                                       "--refresh-package", "jax", str(src)])))
                row["install"].append((0.0, 0.0))
            if not installed_matches(env_python, src):
                wrong.add(name)
    shutil.rmtree(scratch, ignore_errors=True)
    load = os.getloadavg()
    print(f"one step of jax from {args.frontend_src} into a Python 3.12 env with jaxlib {args.jaxlib}: "
          f"{len(revs)} revisions of {args.range} ({', '.join(r[:10] for r in revs)}); medians of wall "
          f"and CPU (user + system) seconds; load average {load_before[0]:.2f} before, {load[0]:.2f} after, "
          f"on {os.cpu_count()} cores shared with other work")
    print(f"\n{'export':<34}{'wall':>8}{'cpu':>8}")
    for name, values in export_times.items():
        wall, cpu = median(values)
        print(f"{name:<34}{wall:>8.2f}{cpu:>8.2f}")
    export_wall, export_cpu = median(export_times["git archive + tarfile"])
    print(f"\n{'build + install (+ git archive export)':<40}{'build':>7}{'install':>8}{'step':>7}{'cpu':>7}"
          f"{'target':>8}  installed tree")
    results = {}
    for name, row in rows.items():
        (build_s, build_cpu), (install_s, install_cpu) = median(row["build"]), median(row["install"])
        step, step_cpu = export_wall + build_s + install_s, export_cpu + build_cpu + install_cpu
        results[name] = {"build": build_s, "install": install_s, "step": step, "step_cpu": step_cpu}
        print(f"{name:<40}{build_s:>7.2f}{install_s:>8.2f}{step:>7.2f}{step_cpu:>7.2f}{STEP_TARGET:>8.1f}  "
              f"{'WRONG: not the revision' if name in wrong else 'the revision'}")
    fastest = min((r["step"], n) for n, r in results.items() if n not in wrong)
    current = results["uv build (isolated)"]["step"]
    print(f"\nfastest correct: {fastest[1]}, {fastest[0]:.2f} s a step; uv build (isolated) {current:.2f} s "
          f"(ratio {current / fastest[0]:.2f})")
    if args.json:
        print(json.dumps({"revisions": revs, "export": export_times, "rows": rows, "wrong": sorted(wrong),
                          "load": [load_before, load]}, indent=1))
    return 1 if wrong else 0


# --- a whole bisection ----------------------------------------------------------------------------

def bisect_once(args: argparse.Namespace, workdir: Path, good: str, bad: str) -> tuple[int, float, dict[str, Any]]:
    """Run ``jaxrel bisect --json``; its exit status, wall seconds, and bisect.json (plus ``_cpu`` seconds)."""
    command = [sys.executable, "-m", "jaxrel", "bisect", "--frontend-src", str(args.frontend_src),
               "--good", good, "--bad", bad, "--cell", args.cell, "--workdir", str(workdir), "--json",
               "--frontend-tests", *args.frontend_tests]
    done: list[subprocess.CompletedProcess[str]] = []
    wall, cpu = timed(lambda: done.append(subprocess.run(command, cwd=ROOT, capture_output=True, text=True)))
    result = workdir / "bisect.json"
    report: dict[str, Any] = json.loads(result.read_text()) if result.is_file() else {}
    report["_stderr_tail"] = done[0].stderr.strip().splitlines()[-3:]
    report["_cpu"] = cpu
    return done[0].returncode, wall, report


def show_run(label: str, status: int, seconds: float, report: dict[str, Any], expect: str | None) -> None:
    steps_ = report.get("steps", [])
    count = int(report.get("commits_in_range") or 0)
    taken = int(report.get("steps_taken") or 0)
    bound = math.ceil(math.log2(count)) + 2 if count else 0
    checks = len(steps_) - taken
    print(f"\n{label}: exit {status}, {seconds:.1f} s wall, {report['_cpu']:.1f} s CPU "
          f"(target {RUN_TARGET:.0f} s wall for a 500-commit range); "
          f"{count} commits; steps: {taken} bisection + {checks} endpoint/parent = {taken + checks} "
          f"against ceil(log2 N) + 2 = {bound}")
    first_bad = report.get("first_bad") or {}
    if first_bad:
        named = first_bad.get("hash", "")
        verdict = "" if expect is None else ("  (the inserted commit)" if named == expect
                                             else f"  (NOT the inserted commit {expect[:12]})")
        print(f"answer: {report.get('status')}: {named[:12]} {first_bad.get('subject', '')}{verdict}")
    else:
        print(f"answer: {report.get('status', '?')}: {report.get('message') or ' | '.join(report['_stderr_tail'])}")
    print(f"{'revision':<14}{'role':<10}{'verdict':<8}{'export':>8}{'build+inst':>11}{'tests':>8}  wheel")
    for step in steps_:
        s = step.get("seconds", {})
        wheel = "cached" if step.get("cached") else "built"
        print(f"{step['commit'][:12]:<14}{step.get('role', 'step'):<10}{step['verdict']:<8}{s.get('export', 0):>8.2f}"
              f"{s.get('build+install', 0):>11.2f}{s.get('tests', 0):>8.2f}  {wheel}")
    built = [s["seconds"] for s in steps_ if not s.get("cached") and s.get("seconds")]
    if built:
        per = [x.get("export", 0) + x.get("build+install", 0) for x in built]
        tests = [x.get("tests", 0) for x in built]
        print(f"export + build + install where a wheel was built ({len(per)} steps): median "
              f"{statistics.median(per):.2f} s, max {max(per):.2f} s (target {STEP_TARGET:.1f} s); "
              f"tests median {statistics.median(tests):.2f} s")


def rev_parse(checkout: Path, rev: str) -> str:
    return sh(["git", "-C", str(checkout), "rev-parse", "--verify", f"{rev}^{{commit}}"]).stdout.decode().strip()


def run(args: argparse.Namespace) -> int:
    worst = 0
    load = os.getloadavg()
    print(f"jaxrel bisect on {args.frontend_src}, cell {args.cell}, tests {' '.join(args.frontend_tests)}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores shared with other work")
    expect = rev_parse(args.frontend_src, args.expect) if args.expect else None
    runs = [("regression", args.good, args.bad, expect, ("wheels cold", "wheels cached"))]
    runs += [("no regression", args.good, args.real_bad, None, ("wheels cold",))] if args.real_bad else []
    walls: dict[str, float] = {}
    for label, good, bad, wanted, attempts in runs:
        workdir = WORK / label.replace(" ", "-")
        shutil.rmtree(workdir, ignore_errors=True)
        for attempt in attempts:
            status, seconds, report = bisect_once(args, workdir, good, bad)
            show_run(f"{label}: {good}..{bad} ({attempt})", status, seconds, report, wanted)
            walls[f"{label}, {attempt}"] = seconds
            if label == "regression" and (status != 0 or (report.get("first_bad") or {}).get("hash") != wanted):
                worst = 1
            if label == "no regression" and report.get("status") != "no-regression":
                worst = 1
    if "regression, wheels cached" in walls:
        cold, warm = walls["regression, wheels cold"], walls["regression, wheels cached"]
        print(f"\nside by side: wheels cold {cold:.1f} s, wheels cached {warm:.1f} s (ratio {cold / warm:.2f})")
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return worst


PHASES = ("start", "builds + environment", "endpoints", "bisection")


def phased_bisect(code: Path, args: argparse.Namespace, workdir: Path, extra: list[str]) -> dict[str, Any]:
    """One cold ``jaxrel bisect`` of the regression range with the jaxrel at ``code`` (a checkout); its wall time
    split into phases by when its progress lines came, its exit status, culprit, rounds and steps."""
    shutil.rmtree(workdir, ignore_errors=True)
    command = [sys.executable, "-m", "jaxrel", "bisect", "--frontend-src", str(args.frontend_src), "--good",
               args.good, "--bad", args.bad, "--cell", args.cell, "--workdir", str(workdir),
               "--frontend-tests", *args.frontend_tests, *extra]
    marks: dict[str, float] = {}
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(code)})
    assert process.stderr is not None
    rounds = 0
    for line in process.stderr:
        now = time.perf_counter() - start
        if line.startswith("bisect: building --bad"):
            marks.setdefault("start", now)
        elif line.startswith("bisect: endpoint"):
            marks.setdefault("builds + environment", now)
            marks["endpoints"] = now
        elif line.startswith(("bisect: round ", "bisect: Bisecting:")):
            rounds += line.startswith("bisect: round ")
    status = process.wait()
    total = time.perf_counter() - start
    report: dict[str, Any] = json.loads((workdir / "bisect.json").read_text()) if (workdir / "bisect.json").is_file() \
        else {}
    edges = [0.0, *(marks.get(phase, 0.0) for phase in PHASES[:-1]), total]
    return {"status": status, "total": total, "phases": {p: edges[i + 1] - edges[i] for i, p in enumerate(PHASES)},
            "culprit": (report.get("first_bad") or {}).get("hash", ""), "steps": report.get("steps_taken", 0),
            "rounds": rounds or report.get("steps_taken", 0)}


def against(args: argparse.Namespace) -> int:
    """This code's cold bisection beside REV's, in turn, ``--rounds`` times: phases side by side."""
    import importlib.util  # _worktree sits beside this file, whose directory is off sys.path (see the top)

    spec = importlib.util.spec_from_file_location("_worktree", Path(__file__).with_name("_worktree.py"))
    assert spec is not None and spec.loader is not None
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    worktree = helper.worktree

    load = os.getloadavg()
    print(f"jaxrel bisect {args.good}..{args.bad} on {args.frontend_src}, cell {args.cell}, tests "
          f"{' '.join(args.frontend_tests)}, every wheel cold; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    expect = rev_parse(args.frontend_src, args.expect)
    rows: list[tuple[str, dict[str, Any]]] = []
    with worktree(args.against, WORK / "against-code") as before:
        for number in range(args.rounds):
            for label, code, extra in ((f"before ({args.against})", before, []),
                                       ("now, --jobs 2", ROOT, ["--jobs", "2"])):
                result = phased_bisect(code, args, WORK / f"against-{number}", extra)
                rows.append((label, result))
    print(f"\n{'run':<26}{'exit':>5}{'total s':>9}" + "".join(f"{p:>22}" for p in PHASES)
          + f"{'steps':>7}{'rounds':>8}  culprit")
    worst = 0
    for label, r in rows:
        same = r["culprit"] == expect
        worst = worst if same and r["status"] == 0 else 1
        print(f"{label:<26}{r['status']:>5}{r['total']:>9.1f}" + "".join(f"{r['phases'][p]:>22.1f}" for p in PHASES)
              + f"{r['steps']:>7}{r['rounds']:>8}  {r['culprit'][:12]}{'' if same else ' (NOT the inserted commit)'}")
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("steps", help="export / build / install of one revision, every way side by side")
    one.add_argument("--frontend-src", type=Path, required=True, help="the lab (or any jax git checkout)")
    one.add_argument("--range", default="lab-good..lab", help="GOOD..BAD to draw revisions from")
    one.add_argument("--revisions", type=int, default=3)
    one.add_argument("--jaxlib", default="0.11.0")
    one.add_argument("--json", action="store_true")
    whole = sub.add_parser("run", help="jaxrel bisect over a range, wheels cold then cached")
    whole.add_argument("--frontend-src", type=Path, required=True, help="the lab (or any jax git checkout)")
    whole.add_argument("--good", default="lab-good")
    whole.add_argument("--bad", default="lab")
    whole.add_argument("--real-bad", default="real-bad",
                       help="also bisect GOOD..this (no regression expected); '' to skip")
    whole.add_argument("--expect", default="lab-inserted", help="the commit the regression run must name ('' for none)")
    whole.add_argument("--cell", default="py3.12-jaxlib0.11.0")
    whole.add_argument("--frontend-tests", nargs="+", default=["tests/api_util_test.py", "tests/tree_util_test.py"])
    side = sub.add_parser("against", help="a cold bisection of the regression range, this code beside REV's, "
                                         "phase by phase")
    side.add_argument("--frontend-src", type=Path, required=True, help="the lab (or any jax git checkout)")
    side.add_argument("--against", required=True, metavar="REV", help="the jaxrel commit to compare with")
    side.add_argument("--good", default="lab-good")
    side.add_argument("--bad", default="lab")
    side.add_argument("--expect", default="lab-inserted", help="the commit both must name")
    side.add_argument("--cell", default="py3.12-jaxlib0.11.0")
    side.add_argument("--rounds", type=int, default=1)
    side.add_argument("--frontend-tests", nargs="+", default=[
        "tests/api_util_test.py::ApiUtilTest::test_resolve_kwargs",
        "tests/api_util_test.py::ApiUtilTest::test_resolve_kwargs_with_keyword"])
    args = parser.parse_args(argv)
    if not shutil.which("uv"):
        raise SystemExit("bisect bench: needs uv (pip install uv)")
    return {"steps": steps, "run": run, "against": against}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
