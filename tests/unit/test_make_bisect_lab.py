"""scripts/make_bisect_lab.py on a small real git history shaped like jax's: the inserted commit,
the rewritten descendants, merges and side branches kept, and the same hashes on a redo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_bisect_lab.py"

VERSION = """_version = "0.11.1"
_minimum_jaxlib_version = '0.11.0'
"""
API_UTIL = """from jax._src import traceback_util

def resolve_kwargs(fun, args, kwargs):
  ba = inspect.signature(fun).bind(*args, **kwargs)
  return ba.args
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.invalid",
           "GIT_AUTHOR_DATE": "1700000000 +0000", "GIT_COMMITTER_DATE": "1700000000 +0000"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def _commit(repo: Path, name: str) -> str:
    (repo / "notes").mkdir(exist_ok=True)
    (repo / "notes" / f"{name}.txt").write_text(name)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", name)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> dict[str, str]:
    """c0 (good) … c6 (bad) on main, a side branch s1-s2 forked at c1 and merged as m1, a second t1
    forked at c3 and merged as m2; the first-parent middle is m1."""
    repo = tmp_path / "jax"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "jax" / "_src").mkdir(parents=True)
    (repo / "jax" / "version.py").write_text(VERSION)
    (repo / "jax" / "_src" / "api_util.py").write_text(API_UTIL)
    (repo / "README.md").write_text("jax\n")
    revs = {"c0": _commit(repo, "c0"), "c1": _commit(repo, "c1")}
    _git(repo, "checkout", "-q", "-b", "side")
    revs |= {"s1": _commit(repo, "s1"), "s2": _commit(repo, "s2")}
    _git(repo, "checkout", "-q", "main")
    revs |= {"c2": _commit(repo, "c2"), "c3": _commit(repo, "c3")}
    _git(repo, "merge", "-q", "--no-ff", "-m", "m1", "side")
    revs["m1"] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "side2", revs["c3"])
    revs["t1"] = _commit(repo, "t1")
    _git(repo, "checkout", "-q", "main")
    revs |= {"c4": _commit(repo, "c4"), "c5": _commit(repo, "c5")}
    _git(repo, "merge", "-q", "--no-ff", "-m", "m2", "side2")
    revs["m2"] = _git(repo, "rev-parse", "HEAD")
    revs["c6"] = _commit(repo, "c6")
    return revs


def _make(mirror: Path, lab: Path, good: str, bad: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--mirror", str(mirror), "--lab", str(lab),
                           "--good", good, "--bad", bad, "--json"], capture_output=True, text=True, timeout=120)


def test_inserts_one_commit_and_keeps_the_shape(history: dict[str, str], tmp_path: Path) -> None:
    done = _make(tmp_path / "jax", tmp_path / "lab", history["c0"], history["c6"])
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    lab = tmp_path / "lab"
    assert summary["commits_real"] == 11 and summary["commits_lab"] == 12 and summary["merges"] == 2
    assert summary["inserted_parent"] == history["m1"], "the first-parent middle"
    assert summary["rewritten"] == 4 and summary["kept"] == 7  # c4 c5 m2 c6 rewritten
    inserted = summary["inserted"]
    assert _git(lab, "rev-parse", f"{inserted}^") == history["m1"]
    assert "_jax.RawBuffer" in _git(lab, "show", inserted, "--", "jax/_src/api_util.py")
    # m2 is still a merge, of the rewritten c5 and the untouched side commit t1
    m2 = _git(lab, "rev-parse", "lab~1")
    parents = _git(lab, "rev-list", "--parents", "-n", "1", m2).split()[1:]
    assert len(parents) == 2 and parents[1] == history["t1"] and parents[0] != history["c5"]
    assert _git(lab, "merge-base", "--is-ancestor", inserted, parents[0]) == ""
    assert subprocess.run(["git", "-C", str(lab), "merge-base", "--is-ancestor", inserted, history["t1"]]
                          ).returncode == 1, "a side branch forked before the insertion does not contain it"
    assert _git(lab, "diff", "--name-only", "real-bad", "lab") == "jax/_src/api_util.py"
    assert _git(lab, "log", "-1", "--format=%an %at %s", "lab") == "a 1700000000 c6", "authors and dates kept"
    assert _git(lab, "rev-parse", "lab-good", "real-bad").split() == [history["c0"], history["c6"]]
    assert _git(lab, "symbolic-ref", "--short", "HEAD") == "lab"


def test_a_redo_gives_the_same_hashes(history: dict[str, str], tmp_path: Path) -> None:
    first = json.loads(_make(tmp_path / "jax", tmp_path / "lab1", history["c0"], history["c6"]).stdout)
    second = json.loads(_make(tmp_path / "jax", tmp_path / "lab2", history["c0"], history["c6"]).stdout)
    assert (first["inserted"], first["lab_bad"]) == (second["inserted"], second["lab_bad"])


def test_refuses_a_range_whose_anchor_moved(history: dict[str, str], tmp_path: Path) -> None:
    repo = tmp_path / "jax"
    (repo / "jax" / "_src" / "api_util.py").write_text(API_UTIL.replace("ba = inspect", "bound = inspect"))
    bad = _commit(repo, "c7")
    done = _make(repo, tmp_path / "lab", history["c0"], bad)
    assert done.returncode != 0
    assert "jax/_src/api_util.py at" in done.stderr and "choose another range" in done.stderr


def test_refuses_a_range_that_refuses_the_backend(history: dict[str, str], tmp_path: Path) -> None:
    repo = tmp_path / "jax"
    (repo / "jax" / "version.py").write_text(VERSION.replace("'0.11.0'", "'0.11.1'"))
    bad = _commit(repo, "c7")
    done = _make(repo, tmp_path / "lab", history["c0"], bad)
    assert done.returncode != 0
    assert "refuse jaxlib 0.11.0" in done.stderr and "minimum 0.11.1" in done.stderr
