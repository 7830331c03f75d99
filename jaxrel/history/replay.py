"""``jaxrel history replay``: backfill the history from the frontend's real main line, night by night.

For each night from ``since`` to ``until`` (every ``every`` days) it takes the newest commit on the
first-parent line of ``branch`` made by that night's end (23:59:59 UTC), runs ``jaxrel compat`` on it
with the index as it stood then (``--as-of``: backend and plugin releases uploaded later left out,
the test requirements resolved as of then), so each night tests the backends that night admitted and
had, ingests the report as that night, and bisects the new regressions it brought (``bisect-new``).

With ``jobs`` above 1, that many nights' compat runs go at once (each in a work directory of its own,
reused night after night); the store is still written by one writer, this process, in night order, and a
night's new regressions are bisected before the next night is ingested.

A night already in the store for the same commit is not run again: an interrupted replay resumes
where it stopped. A night whose compat run cannot start (the commit does not build, no cell) is said
in one line and the next night runs; bad options (exit 2 on the first night) stop the replay.
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jaxrel._util import procs
from jaxrel.bisect import git
from jaxrel.errors import BadInput
from jaxrel.history.bisect_new import bisect_new, last_error
from jaxrel.history.ingest import ingest
from jaxrel.history.regressions import Regression
from jaxrel.history.store import Store

__all__ = ["MAX_NIGHTS", "Night", "ReplayRequest", "main_line", "nights", "replay"]

MAX_NIGHTS = 3660  # ten years of nights: more is a typo


@dataclass(frozen=True)
class ReplayRequest:
    source: Path  # the frontend's git checkout (only read)
    since: datetime.date
    until: datetime.date
    every: int = 1  # days between nights
    branch: str = "HEAD"  # the main line
    workdir: Path = Path("build/history/replay")
    compat_args: tuple[str, ...] = ()  # the cell options passed to jaxrel compat (--python, --cell, …)
    env: tuple[str, ...] = ()  # --env KEY=VALUE, for compat and bisect alike
    shared_args: tuple[str, ...] = ()  # --family, --index-url, --wheelhouse: for compat and bisect alike
    bisect: bool = True
    jobs: int = 1  # nights whose compat runs at once (ingest and bisect stay one at a time, in night order)


@dataclass
class Night:
    night: str
    commit: str  # "" when the main line had no commit yet
    outcome: str  # ok | failed | skipped (kept already) | not run (why in ``said``)
    seconds: float = 0.0
    regressions: list[tuple[str, str]] = field(default_factory=list)
    said: str = ""


def nights(since: datetime.date, until: datetime.date, every: int) -> list[datetime.date]:
    """The nights from ``since`` to ``until``, both included, ``every`` days apart."""
    if every < 1:
        raise BadInput(f"--every {every}d: expected 1d or more")
    if until < since:
        raise BadInput(f"--until {until} is before --since {since}; give the older date first")
    count = (until - since).days // every + 1
    if count > MAX_NIGHTS:
        raise BadInput(f"{count} nights from {since} to {until}: at most {MAX_NIGHTS}; narrow the range or pass "
                       "--every")
    return [since + datetime.timedelta(days=i * every) for i in range(count)]


def main_line(source: Path, branch: str, dates: Sequence[datetime.date]) -> dict[datetime.date, str]:
    """Night → the newest first-parent commit of ``branch`` committed by that night's end ("" when none)."""
    where = git.locate(source)
    tip = git.git("rev-parse", "--verify", f"{git.check_revision(branch, '--branch')}^{{commit}}",
                  git_dir=where.git_dir, check=False)
    if tip.returncode != 0:
        raise BadInput(f"--branch {branch}: no such revision in {source}; name the main line (main, origin/main)")
    listed = git.git("log", "--first-parent", "--format=%H %ct", tip.stdout.strip(), git_dir=where.git_dir)
    line = [(int(stamp), commit) for commit, stamp in (row.split() for row in listed.stdout.splitlines() if row)]
    found: dict[datetime.date, str] = {}
    for day in dates:
        end = datetime.datetime.combine(day, datetime.time(23, 59, 59), datetime.UTC).timestamp()
        found[day] = next((commit for stamp, commit in line if stamp <= end), "")
    return found


def _kept(store: Store, night: str, commit: str) -> bool:
    return bool(store.rows("SELECT 1 FROM runs WHERE night = ? AND frontend_commit = ? AND kind = 'compat' LIMIT 1",
                           (night, commit)))


def replay(store: Store, request: ReplayRequest, progress: Callable[[str], None] = print) -> list[Night]:
    """Run, ingest and bisect each night (see the module doc). Up to ``request.jobs`` nights' compat runs go at
    once, each in a work directory of its own (a slot, reused night after night); their reports are ingested one at
    a time in night order, and each night's new regressions are bisected before the next night is ingested."""
    dates = nights(request.since, request.until, request.every)
    line = main_line(request.source, request.branch, dates)
    done: list[Night] = []
    waiting = list(enumerate(dates, 1))
    running: list[_Running] = []
    slots = [request.workdir / ("compat" if slot == 0 else f"compat-{slot}") for slot in range(max(1, request.jobs))]
    try:
        while waiting or running:
            while waiting and len(running) < len(slots):  # start the next nights, in night order
                number, day = waiting.pop(0)
                night, commit = day.isoformat(), line[day]
                if not commit or _kept(store, night, commit):
                    running.append(_Running(number, night, commit, None))
                    continue
                free = next(slot for slot in slots if all(r.slot != slot for r in running))
                running.append(_start(request, number, night, commit, free))
            first = running.pop(0)
            shown = _finish(store, request, first)
            done.append(shown)
            progress(f"[{first.number}/{len(dates)}] {shown.night} {shown.commit[:12] or '-'}: {shown.outcome}"
                     + (f" ({shown.seconds:.0f} s)" if shown.seconds else "")
                     + (f"; {shown.said}" if shown.said else ""))
            if request.bisect and shown.regressions:
                def tonight(regression: Regression, night: str = shown.night) -> bool:
                    return regression.night == night

                bisected = bisect_new(store, request.source, request.workdir / "bisect", env=request.env,
                                      shared_args=request.shared_args, progress=progress, only=tonight)
                shown.said += "".join(f"; {b.key}: {b.said}" for b in bisected)
    finally:  # an interrupt, a refused first night or a bug: no compat run outlives the replay
        for left in running:
            left.stop()
    return done


@dataclass
class _Running:
    """One night's compat run, started (``process``) or with nothing to run (no commit, kept already)."""

    number: int
    night: str
    commit: str
    process: subprocess.Popen[bytes] | None
    slot: Path | None = None
    log: Path | None = None
    started: float = 0.0

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            procs.stop(self.process)


@procs.in_phase("history.replay")
def _start(request: ReplayRequest, number: int, night: str, commit: str, slot: Path) -> _Running:
    """``jaxrel compat`` on ``commit`` as of ``night``, in ``slot``, its output in the night's ``compat.log``."""
    (slot / "report.json").unlink(missing_ok=True)
    arguments = ["compat", "--frontend-src", str(request.source), "--ref", commit, "--as-of", night,
                 "--workdir", str(slot), "--no-extension", *request.compat_args,
                 *(part for pair in request.env for part in ("--env", pair)), *request.shared_args]
    log = request.workdir / "nights" / night / "compat.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ jaxrel {' '.join(arguments)}\n")
    with log.open("ab") as out:
        process = procs.popen([sys.executable, "-m", "jaxrel", *arguments], stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
    return _Running(number, night, commit, process, slot, log, time.perf_counter())


def _finish(store: Store, request: ReplayRequest, running: _Running) -> Night:
    """Wait for the night's compat run and ingest its report (or say why there is none)."""
    night, commit = running.night, running.commit
    if running.process is None:
        return (Night(night, "", "not run", said=f"no commit on {request.branch} by then") if not commit
                else Night(night, commit, "skipped", said="kept already"))
    assert running.slot is not None and running.log is not None
    code = running.process.wait()
    with running.log.open("a") as out:
        out.write(f"\n(exit {code})\n")
    if code in (130, -2):
        raise KeyboardInterrupt
    seconds = time.perf_counter() - running.started
    where, report = running.log.parent, running.slot / "report.json"
    if code not in (0, 1) or not report.is_file():
        said = f"exit {code}: {last_error(running.log)}"
        if code == 2 and not store.rows("SELECT 1 FROM runs WHERE kind = 'compat' LIMIT 1"):
            raise BadInput(f"jaxrel compat refused the first night's options: {said}")
        return Night(night, commit, "not run", seconds, said=said)
    kept = where / "report.json"
    shutil.copyfile(report, kept)
    if (running.slot / "report.md").is_file():
        shutil.copyfile(running.slot / "report.md", where / "report.md")
    done = ingest(store, kept, night=night, source=f"replay of {commit}")
    return Night(night, commit, "ok" if code == 0 else "failed", seconds, done.regressions,
                 f"{done.cells} cells, {done.results} results"
                 + (f", new regressions in {len({cell for cell, _ in done.regressions})} cells" if done.regressions
                    else ""))
