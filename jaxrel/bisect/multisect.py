"""Multisection: several probes a round, with git's bisection still keeping the state and naming the culprit.

``git bisect run`` tests one commit at a time. With ``k`` probes a round the commits left shrink about
``(k + 1)``-fold: the probes are the commits whose share of the commits left (those they reach, themselves
included) is closest to ``1/(k+1), 2/(k+1), …`` (for ``k = 1`` git's own choice, the commit closest to halving
the range). They run at once, each a step process (:mod:`jaxrel.bisect.step`) in its own copy of the cell's
environment, and their verdicts go to git (``git bisect good|skip|bad REV``). git keeps its refs and names the
first bad commit, or the candidates skips leave, as ``git bisect run`` would: the same verdicts on the same
commits give the same answer.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxrel._util import procs
from jaxrel._util.text import tail
from jaxrel.bisect.git import STOP_GRACE, GitError, Outcome, Repo, parse_outcome
from jaxrel.bisect.records import StepConfig
from jaxrel.bisect.step import BAD, EXIT, GOOD, SKIP, precompile
from jaxrel.errors import EnvironmentFailure
from jaxrel.family import Family

__all__ = ["Remaining", "StepFailed", "choose", "prepare_slot", "remaining", "run_probes", "search"]

VERDICT = {code: verdict for verdict, code in EXIT.items()}
MERGE_BASE = "a merge base must be tested"  # git's words when a good commit is not an ancestor of the bad one


class StepFailed(EnvironmentFailure):
    """A step process ended without a verdict (a bug or a broken environment): the bisection stops (exit 3)."""


@dataclass(frozen=True)
class Remaining:
    """The commits git has left to tell apart: reachable from the bad ref, not from a good one, in git's
    topological order (children first); each one's weight (how many of them it reaches, itself included); the
    ones already skipped."""

    commits: list[str]
    weights: dict[str, int]
    skipped: frozenset[str]
    bad: str


def _weights(order: Sequence[str], parents: dict[str, list[str]]) -> dict[str, int]:
    """How many commits of ``order`` each one reaches (itself included): a bit set per commit, parents first."""
    index = {commit: bit for bit, commit in enumerate(order)}
    reach: dict[str, int] = {}
    for commit in reversed(order):  # --topo-order lists children first: parents are done before their children
        bits = 1 << index[commit]
        for parent in parents[commit]:
            bits |= reach.get(parent, 0)
        reach[commit] = bits
    return {commit: bits.bit_count() for commit, bits in reach.items()}


def remaining(repo: Repo) -> Remaining:
    """What git's bisection has left, from its refs (``refs/bisect/bad``, ``good-*``, ``skip-*``)."""
    refs = repo.run("for-each-ref", "--format=%(refname) %(objectname)", "refs/bisect/").stdout.split("\n")
    pairs = [line.split() for line in refs if line.strip()]
    bad = next(obj for name, obj in pairs if name == "refs/bisect/bad")
    goods = [obj for name, obj in pairs if name.startswith("refs/bisect/good-")]
    skipped = frozenset(obj for name, obj in pairs if name.startswith("refs/bisect/skip-"))
    listing = repo.run("rev-list", "--topo-order", "--parents", bad, *(f"^{g}" for g in goods)).stdout
    order, parents = [], {}
    for line in listing.splitlines():
        commit, *its_parents = line.split()
        order.append(commit)
        parents[commit] = its_parents
    return Remaining(order, _weights(order, parents), skipped, bad)


def choose(left: Remaining, k: int) -> list[str]:
    """Up to ``k`` commits to test now: for each ``i``, the untested commit whose weight is closest to
    ``i·N/(k+1)`` (ties: git's order); fewer when fewer are left."""
    n = len(left.commits)
    testable = [c for c in left.commits if c != left.bad and c not in left.skipped]
    chosen: list[str] = []
    for i in range(1, k + 1):
        target = i * n / (k + 1)
        free = [c for c in testable if c not in chosen]
        if not free:
            break
        chosen.append(min(free, key=lambda c: abs(left.weights[c] - target)))
    return chosen


@procs.in_phase("bisect.environment")
def prepare_slot(config: StepConfig, family: Family, slot: int) -> None:
    """Probe slot ``slot`` made ready: a copy of the cell's environments for every slot but the first (replaced; a
    virtual environment runs from any directory when started by its own ``bin/python``, which is how every step
    starts it), and its frontend's bytecode compiled (:func:`jaxrel.bisect.step.precompile`)."""
    for root in config.env_roots if slot > 0 else ():
        target = config.env_of(slot, root)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(config.env_of(0, root), target, symlinks=True)
    precompile(config, family, slot)


def run_probes(config_path: Path, probes: Sequence[tuple[str, str]], progress: Callable[[str], None]
               ) -> dict[str, str]:
    """Test each ``(commit, role)`` at once, slot by slot, as step processes (each in its own session); their
    verdicts. On an interrupt or error every step is stopped, whole, before the exception goes on."""
    started: list[tuple[str, subprocess.Popen[str]]] = []
    try:
        for slot, (commit, role) in enumerate(probes):
            command = [sys.executable, "-m", "jaxrel.bisect.step", str(config_path), "--rev", commit,
                       "--slot", str(slot), "--role", role]
            started.append((commit, procs.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                text=True)))
        verdicts: dict[str, str] = {}
        for commit, process in started:
            output, _ = process.communicate()
            for line in output.splitlines():
                if line.startswith("bisect: "):
                    progress(line)
            code = process.returncode
            if code not in VERDICT:
                raise StepFailed(f"the step at {commit[:12]} failed (exit {code}): {output.strip()[-2000:]}")
            verdicts[commit] = VERDICT[code]
        return verdicts
    except BaseException:
        for _, process in started:
            procs.stop(process, grace=STOP_GRACE)
        raise


def _tell(repo: Repo, *args: str) -> str:
    """``git bisect ARGS``; its output. git exits 2 when only skipped commits are left, having listed them."""
    done = repo.run("bisect", *args, check=False)
    output = done.stdout + done.stderr
    if done.returncode != 0 and "could be any of" not in output:
        raise GitError(f"git bisect {args[0]} failed (exit {done.returncode}): {tail(output)}")
    return output


def _feed(repo: Repo, left: Remaining, verdicts: dict[str, str]) -> str:
    """Tell git the round's verdicts: goods, skips, then the bad one reaching least (git keeps one bad ref, and
    the first bad commit is among its ancestors); git's output for the last."""
    output = ""
    goods = [c for c, v in verdicts.items() if v == GOOD]
    skips = [c for c, v in verdicts.items() if v == SKIP]
    bads = sorted((c for c, v in verdicts.items() if v == BAD), key=lambda c: left.weights[c])
    for commit in goods:
        output = _tell(repo, "good", commit)
    if skips:
        output = _tell(repo, "skip", *skips)
    if bads:
        output = _tell(repo, "bad", bads[0])
    return output


def search(repo: Repo, config_path: Path, slots: int, progress: Callable[[str], None]) -> Outcome:
    """After ``git bisect start``: rounds of up to ``slots`` probes until git names the first bad commit or the
    candidates skips leave."""
    rounds = 0
    while True:
        left = remaining(repo)
        probes = choose(left, slots)
        if not probes:  # nothing testable is left: let git say so (only skipped commits, or the bad one)
            told = _tell(repo, "next")
            if MERGE_BASE not in told:
                return parse_outcome(told)
            # a good commit on a branch the bad one does not contain: git must know their merge base good, and has
            # checked it out (BISECT_HEAD), as ``git bisect run`` would test it next
            probes = [repo.head()]
        rounds += 1
        progress(f"bisect: round {rounds}: {len(left.commits)} commits left, testing "
                 + ", ".join(c[:12] for c in probes))
        verdicts = run_probes(config_path, [(c, "step") for c in probes], progress)
        output = _feed(repo, left, verdicts)
        outcome = parse_outcome(output)
        if outcome.candidates:
            return outcome
