"""Ctrl-C in every phase of every verb that runs children, as a class: for each phase in
:data:`jaxrel._util.procs.PHASES`, jaxrel runs for real on a sample family until that phase starts its child,
where ``JAXREL_TEST_HOLD`` puts the holder (tests/interrupt_holder.py) in the child's place. The holder says when it
holds; the test then sends SIGINT. Each phase runs twice: SIGINT to jaxrel's process group (as a terminal sends it)
with a child that honours SIGINT, and SIGINT to jaxrel alone with a child that ignores it; in both, the child has
started a grandchild in a session of its own that ignores SIGINT and SIGTERM (uv's build backend, a daemon), out
of reach of any signal to the child's group. (The six pairings of route and kind, on children of the main thread
and of a pool's worker at once: tests/unit/test_procs.py.) Each run: exit 130 with the one line, within the grace
(a hang fails by the test's own deadline), every process the holder made gone, and no report left that a later
run would trust. No sleep decides anything.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from bisect_support import History, make_history
from splitfam_support import core_release, make_splitfam, plugin_release, set_frontend_version

from jaxrel._util import procs
from jaxrel.distributions.pipconfig import pip_index_config

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
HOLDER = Path(__file__).resolve().parents[1] / "interrupt_holder.py"
RUNS = [("honours+own-session", "group"), ("ignores+own-session", "jaxrel alone")]
GRACE = "0.5"  # seconds from SIGINT to SIGKILL in these runs (JAXREL_STOP_GRACE; 3 by default): the same path


@dataclass(frozen=True)
class Fixtures:
    wheelhouse: Path  # splitfam-core 0.1.0, 0.2.0, its plugin 0.1.0, splitfam 0.2.0
    history: History  # the bisect history (its commits on 2025-01-01)
    compat_repo: Path  # splitfam 0.2.0, committed
    store: Path  # a history store with an open, bisectable regression of the history's cell


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    template = make_splitfam(tmp_path_factory, "interrupt-releases")
    wheels = tmp_path_factory.mktemp("interrupt-wheelhouse") / "wheels"
    core_release(template, "0.1.0", 1, wheels)
    core_release(template, "0.2.0", 2, wheels, extra="def mul(a, b):\n    return a * b\n")
    plugin_release(template, "0.1.0", wheels)
    history = make_history(make_splitfam(tmp_path_factory, "interrupt-history"))
    repo = make_splitfam(tmp_path_factory, "interrupt-compat")
    set_frontend_version(repo, "0.2.0", "0.1.0")
    subprocess.run(["git", "commit", "-qam", "splitfam 0.2.0"], cwd=repo, check=True)
    store = tmp_path_factory.mktemp("interrupt-store") / "history.sqlite"
    commits = subprocess.run(["git", "rev-list", "--reverse", "HEAD"], cwd=history.repo, capture_output=True,
                             text=True, check=True).stdout.split()
    _regressed_store(store, history, commits[-2], commits[-1])
    return Fixtures(wheels, history, repo, store)


def _regressed_store(store: Path, history: History, good: str, bad: str) -> None:
    """Two nights of the history's cell: its own test passes at ``good`` and fails at ``bad`` (a regression with a
    range and a test: what bisect-new bisects)."""
    from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix, Outcome, Purpose
    from jaxrel.cells.suites import TestCounts
    from jaxrel.compat.report import to_json
    from jaxrel.compat.result import CellResult
    from jaxrel.compat.triage import Failure
    from jaxrel.history.ingest import ingest
    from jaxrel.history.store import open_store

    opened = open_store(store)
    cell = Cell(f"py{PY}-splitfam-core0.1.0", PY, "0.1.0", (), Purpose.ADMITTED, Outcome.ACCEPTED)
    for night, commit in ((1, good), (2, bad)):
        failures = [Failure("own tests", "tests/test_add.py::test_add", "failed", "AssertionError", "")] \
            if night == 2 else []
        result = CellResult(cell, Outcome.ACCEPTED, True, 1.0, tests=TestCounts(passed=1), failures=failures,
                            outcomes={"test_api.py::test_api[splitfam.add]": "passed"},
                            frontend_tests=TestCounts(passed=2 - len(failures), failed=len(failures)))
        result.settle()
        report = to_json(Matrix("splitfam", FrontendSpec("splitfam", "0.2.0", "0.1.0", "source splitfam"),
                                "splitfam-core", [cell]), [result], frontend={"commit": commit, "dirty": False})
        path = store.parent / f"night-{night}.json"
        path.write_text(json.dumps(report))
        ingest(opened, path, night=f"2025-01-0{night}")
    opened.close()


Command = Callable[[Fixtures, Path], list[str]]


def _bisect(f: Fixtures, work: Path) -> list[str]:
    return ["bisect", "--family", str(f.history.repo / "pyproject.toml"), "--frontend-src",
            str(f.history.repo / "frontend"), "--good", f.history.good, "--bad", "HEAD", "--cell",
            f"py{PY}-splitfam-core0.1.0", "--workdir", str(work)]


def _compat(f: Fixtures, work: Path) -> list[str]:
    return ["compat", "--family", str(f.compat_repo / "pyproject.toml"), "--frontend-src",
            str(f.compat_repo / "frontend"), "--python", PY, "--workdir", str(work), "--no-extension",
            "--cell", f"py{PY}-splitfam-core0.1.0"]


def _atlas(f: Fixtures, work: Path) -> list[str]:
    """The atlas measures jax's own API (the jax profile only): one real release on its newest jaxlib, as
    tests/integration/test_atlas_real.py measures it (the same wheels, cached once for both)."""
    return ["atlas", "--frontends", "0.5.0", "--backends", "newest", "--workdir", str(work)]


def _replay(f: Fixtures, work: Path) -> list[str]:
    return ["history", "replay", "--db", str(work.parent / "replay.sqlite"), "--family",
            str(f.history.repo / "pyproject.toml"), "--frontend-src", str(f.history.repo / "frontend"), "--branch",
            "main", "--since", "2025-01-01", "--until", "2025-01-02", "--python", PY, "--workdir", str(work)]


def _bisect_new(f: Fixtures, work: Path) -> list[str]:
    store = work.parent / "store.sqlite"
    shutil.copyfile(f.store, store)
    return ["history", "bisect-new", "--db", str(store), "--family", str(f.history.repo / "pyproject.toml"),
            "--frontend-src", str(f.history.repo / "frontend"), "--workdir", str(work)]


def _release_build(f: Fixtures, work: Path) -> list[str]:
    return ["release", "build", "--project", str(f.compat_repo), "--component", "splitfam", "--output",
            str(work / "dist")]


CASES: dict[str, Command] = {  # every phase: the command that reaches it
    "bisect.build": _bisect, "bisect.environment": _bisect, "bisect.step": _bisect, "bisect.step-tests": _bisect,
    "compat.environment": _compat, "compat.cell": _compat, "atlas.environment": _atlas, "atlas.cell": _atlas,
    "history.replay": _replay, "history.bisect-new": _bisect_new, "release.build": _release_build,
}
DOWNSTREAM = ("downstream.environment", "downstream.tests", "downstream.bisection")  # test_interrupts_downstream.py


def test_every_phase_has_its_case() -> None:
    """A phase added to procs.PHASES without a line here fails: its Ctrl-C case is part of adding it."""
    assert set(CASES) | set(DOWNSTREAM) == set(procs.PHASES)


def _gone(pid: int, seconds: float = 30.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(") ", 1)[1][0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("kind", "route"), RUNS, ids=["honours-group", "ignores-alone"])
@pytest.mark.parametrize("phase", sorted(CASES))
def test_ctrl_c_in_each_phase(phase: str, kind: str, route: str, fixtures: Fixtures, tmp_path: Path,
                              index_reachable: None) -> None:
    links = " ".join([str(fixtures.wheelhouse), *pip_index_config().find_links])
    interrupted(phase, kind, route, CASES[phase](fixtures, tmp_path / "work"), tmp_path,
                {**os.environ, "PIP_FIND_LINKS": links})


def interrupted(phase: str, kind: str, route: str, command: list[str], where: Path, env: dict[str, str]) -> None:
    """Run ``jaxrel COMMAND`` with the holder of ``kind`` in ``phase``, interrupt it there by ``route``, and check
    what is left: exit 130 and one line, nothing running, no report a later run would trust."""
    held = where / "held"
    held.mkdir()
    env = {**env, procs.HOLD: f"{phase}={shlex.join([sys.executable, str(HOLDER), kind, str(held)])}",
           "JAXREL_STOP_GRACE": GRACE}
    process = subprocess.Popen([sys.executable, "-m", "jaxrel", *command], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, cwd=where, start_new_session=True)
    deadline = time.monotonic() + 600
    while not list(held.glob("held-*")):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"{phase} was never reached: {process.communicate()[1][-3000:]}")
        time.sleep(0.05)
    pids = [int(line) for line in (held / "pids").read_text().split()]
    if route == "group":
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=120)  # the grace is seconds: a run still going has lost the interrupt
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"jaxrel went on after Ctrl-C in {phase}: {process.communicate()[1][-3000:]}")
    assert process.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1].endswith(": interrupted"), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    left = [pid for pid in pids if not _gone(pid)]
    assert left == [], f"still running after jaxrel exited: {left}"
    for report in [*where.rglob("report.json"), *where.rglob("crater.json"), *where.rglob("atlas.json")]:
        assert json.loads(report.read_text()).get("complete") is False, \
            f"an interrupted run left {report}, which a later run would trust"
    for store in where.rglob("*.sqlite"):  # a history store: whole, and nothing ingested from the stopped run
        with sqlite3.connect(store) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), store
            assert db.execute("SELECT COUNT(*) FROM culprits").fetchone() == (0,), f"{store}: a culprit was kept"
            if phase == "history.replay":  # its first night was the one interrupted
                assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,), f"{store}: a night was kept"
