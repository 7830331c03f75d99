"""Multisection (jaxrel.bisect.multisect): k probes a round, git still deciding. Checked against ``git bisect run``
itself on real git histories (linear, with merges, with skipped commits): the same first bad commit or the same
candidates, in about log_(k+1) N rounds."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest

from jaxrel.bisect import multisect
from jaxrel.bisect.git import Repo, locate, parse_outcome
from jaxrel.bisect.step import BAD, GOOD, SKIP


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": "1735689600 +0000", "GIT_COMMITTER_DATE": "1735689600 +0000"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``value.py`` holding VALUE = 1..60 on the main line, with a side branch (VALUE kept, ``side.py``
    changed) forked at 20 and merged at 40: 60 main-line commits, 6 side commits, one merge."""
    root = tmp_path_factory.mktemp("history") / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "u")
    _git(root, "config", "user.email", "u@example.invalid")
    for number in range(1, 61):
        if number == 20:
            _git(root, "branch", "side")
        if number == 40:
            _git(root, "checkout", "-q", "side")
            for step in range(6):
                (root / "side.py").write_text(f"SIDE = {step}\n")
                _git(root, "add", "-A")
                _git(root, "commit", "-qm", f"side {step}")
            _git(root, "checkout", "-q", "main")
            _git(root, "merge", "-q", "--no-ff", "-m", "merge side", "side")
        (root / "value.py").write_text(f"VALUE = {number}\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", f"value {number}")
    return root


def _value(repo: Repo, commit: str) -> int:
    return int(repo.run("show", f"{commit}:value.py").stdout.split("=")[1])


def _verdict(value: int, first_bad: int, skipped: set[int]) -> str:
    return SKIP if value in skipped else BAD if value >= first_bad else GOOD


STEP = """#!/bin/sh
v=$(git cat-file -p BISECT_HEAD:value.py | sed 's/VALUE = //')
for s in {skipped}; do [ "$v" = "$s" ] && exit 125; done
[ "$v" -ge {first_bad} ] && exit 1
exit 0
"""


def _by_git(history: Path, tmp_path: Path, first_bad: int, skipped: set[int]) -> list[str]:
    clone = Repo.clone(locate(history), tmp_path / "git.git")
    script = tmp_path / "step.sh"
    script.write_text(STEP.replace("{first_bad}", str(first_bad)).replace("{skipped}", " ".join(map(str, skipped))
                                                                         or "none"))
    script.chmod(0o755)
    clone.start(_git(history, "rev-parse", "main"), [_git(history, "rev-list", "--max-parents=0", "main")])
    return sorted(parse_outcome(clone.run("bisect", "run", str(script), check=False).stdout).candidates)


@pytest.mark.parametrize(("first_bad", "skipped", "k"), [
    (2, set(), 2), (27, set(), 2), (41, set(), 2), (60, set(), 2), (50, set(), 3), (24, {23, 24, 25}, 2),
    (30, {29, 31}, 1), (45, set(), 1),
])
def test_the_answer_is_git_bisect_runs_in_log_k_plus_1_rounds(history: Path, tmp_path: Path, first_bad: int,
                                                               skipped: set[int], k: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    clone = Repo.clone(locate(history), tmp_path / "multi.git")
    rounds: list[list[str]] = []

    def probes(config_path: Path, chosen: list[tuple[str, str]], progress: object) -> dict[str, str]:
        assert 0 < len(chosen) <= k and len({c for c, _ in chosen}) == len(chosen)
        rounds.append([c for c, _ in chosen])
        return {c: _verdict(_value(clone, c), first_bad, skipped) for c, _ in chosen}

    monkeypatch.setattr(multisect, "run_probes", probes)
    clone.start(_git(history, "rev-parse", "main"), [_git(history, "rev-list", "--max-parents=0", "main")])
    outcome = multisect.search(clone, tmp_path / "step.json", k, lambda line: None)
    assert sorted(outcome.candidates) == _by_git(history, tmp_path, first_bad, skipped)
    if not skipped:  # 66 commits: ⌈log_(k+1) 66⌉ rounds, one more where merges make the thirds uneven
        assert len(rounds) <= math.ceil(math.log(66, k + 1)) + 1, rounds


def test_a_good_commit_on_a_side_branch_makes_the_merge_base_a_probe(history: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Goods on a merged branch (jax's main line merges pull requests), the bad one on the main line right after
    the fork: no commit is left between them, but git must know their merge base good and has checked it out.
    Before, the search ended there, "git bisect ended without an answer: Bisecting: a merge base must be tested"
    (the real 0.7.0 Crater's diffrax bisection); now the merge base is probed and git names the first bad commit,
    as ``git bisect run`` does."""
    clone = Repo.clone(locate(history), tmp_path / "merge-base.git")
    tested: list[int] = []

    def probes(config_path: Path, chosen: list[tuple[str, str]], progress: object) -> dict[str, str]:
        tested.extend(_value(clone, c) for c, _ in chosen)
        return {c: _verdict(_value(clone, c), 20, set()) for c, _ in chosen}

    monkeypatch.setattr(multisect, "run_probes", probes)
    log = _git(history, "log", "--first-parent", "--format=%H %s", "main")
    by_subject = {subject: commit for commit, subject in (line.split(" ", 1) for line in log.splitlines())}
    clone.start(by_subject["value 60"], [_git(history, "rev-list", "--max-parents=0", "main")])
    clone.run("bisect", "good", _git(history, "rev-parse", "side"))
    told = clone.run("bisect", "bad", by_subject["value 20"], check=False)
    assert multisect.MERGE_BASE in told.stdout + told.stderr  # the fork point (value 19) is not known good
    outcome = multisect.search(clone, tmp_path / "step.json", 2, lambda line: None)
    assert outcome.candidates == [by_subject["value 20"]], outcome
    assert tested == [19]  # the merge base, probed: nothing else was left


def test_probes_split_the_range_into_k_plus_1_parts(history: Path, tmp_path: Path) -> None:
    clone = Repo.clone(locate(history), tmp_path / "c.git")
    clone.start(_git(history, "rev-parse", "main"), [_git(history, "rev-list", "--max-parents=0", "main")])
    left = multisect.remaining(clone)
    assert len(left.commits) == 66 and left.weights[left.bad] == 66
    assert left.weights[_git(history, "rev-parse", "side")] == 24  # values 2..19 (1 is the good root), 6 side
    thirds = [left.weights[c] for c in multisect.choose(left, 2)]
    assert [abs(w - 66 * i / 3) <= 1 for i, w in enumerate(thirds, 1)] == [True, True], thirds
    (half,) = multisect.choose(left, 1)
    assert abs(left.weights[half] - 33) <= 1
    assert len(multisect.choose(left, 200)) == 65  # every commit but the known bad one, none twice


def test_weights_count_each_commit_reached_once() -> None:
    # d merges b and c, both children of a: d reaches a, b, c and itself (a once)
    parents = {"d": ["b", "c"], "c": ["a"], "b": ["a"], "a": []}
    assert multisect._weights(["d", "c", "b", "a"], parents) == {"d": 4, "c": 2, "b": 2, "a": 1}
