"""Run ``jaxrel release bump --family jax`` at the parent of every version commit of jax's maintainers and
compare what it writes with what they committed, value for value.

Usage: ``python scripts/jax_bump_history.py --jax JAX_GIT [--since 2025-01-01]`` (a jax git repository with
its history). Each commit of ``git log -- jax/version.py`` whose subject says it prepares a release or
follows one ("Prepare for JAX release", "Update version numbers after", "Postrelease", "Updates after
JAX release", "Release JAX v…") is replayed: its parent's ``jax/version.py``, ``setup.py`` and
``CHANGELOG.md`` are written to a scratch directory (no git: no tags, as CI's tagless clone), the bump
the commit corresponds to is run there with the index (pip's) asked as of the commit (post-release:
``bump NEXT --release-date D`` with NEXT and D read from the commit, or ``bump NEXT`` alone with
``--from-index``; prepare: ``bump R --minimum-backend M``), and the version values and the changelog's
release headings are compared with the commit's. Prints one row per commit and the totals; nothing of
jax is kept.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("jax/version.py", "setup.py", "CHANGELOG.md", "pyproject.toml")
KEYS = ("_version", "_minimum_jaxlib_version", "_current_jaxlib_version", "_latest_jaxlib_version_on_pypi",
        "_libtpu_version")
POST = re.compile(r"update version numbers after|postrelease|updates after jax release|^release jax v|"
                  r"^jax release v", re.I)
PREPARE = re.compile(r"prepare for jax release", re.I)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def show(repo: Path, rev: str, path: str) -> str | None:
    done = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def values(texts: dict[str, str | None]) -> dict[str, str]:
    joined = (texts.get("jax/version.py") or "") + (texts.get("setup.py") or "")
    return {k: v for k, v in re.findall(rf"^({'|'.join(KEYS)})\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", joined, re.M)}


def headings(text: str | None) -> list[str]:
    return re.findall(r"^## (.+?)\s*$", text or "", re.M)[:3]


def _day(text: str) -> str | None:
    for form in ("%B %d, %Y", "%b %d, %Y"):  # jax writes "March 2, 2026", once "Mar 19, 2025"
        try:
            return datetime.datetime.strptime(text, form).date().isoformat()
        except ValueError:
            continue
    return None


def replay(repo: Path, commit: str, subject: str, from_index: bool = False) -> tuple[str, str, str]:
    """(the bump's arguments, 'same' or what differs, the commit's subject). The index is asked as of the commit
    (was the declared version released when the maintainers bumped it?); ``from_index``: the post-release bump
    without ``--release-date``, the release date taken from the index's first upload."""
    before = {path: show(repo, f"{commit}^1", path) for path in FILES}
    when = git(repo, "show", "-s", "--format=%cI", commit).strip()
    after = {path: show(repo, commit, path) for path in FILES}
    old, new = values(before), values(after)
    if PREPARE.search(subject):
        argv = [new.get("_version", ""), "--minimum-backend", new.get("_minimum_jaxlib_version", "")]
    else:
        dated = next((h for h in headings(after["CHANGELOG.md"]) if old.get("_version", "?") in h), "")
        found = re.search(r"\(([A-Z][a-z]+ \d{1,2}, \d{4})\)", dated)
        day = _day(found.group(1)) if found else None
        argv = [new.get("_version", ""), *(["--release-date", day] if day and not from_index else [])]
        if old.get("_minimum_jaxlib_version") != new.get("_minimum_jaxlib_version"):  # a merge of the release branch
            argv += ["--minimum-backend", new.get("_minimum_jaxlib_version", "")]
    if old.get("_libtpu_version") != new.get("_libtpu_version") and new.get("_libtpu_version"):
        argv += ["--pin", f"libtpu={new['_libtpu_version']}"]  # libtpu's own numbering: given, as they chose it
    with tempfile.TemporaryDirectory(prefix="jaxrel-bump-history-") as scratch:
        root = Path(scratch)
        for path, text in before.items():
            if text is not None:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(text)
        done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "bump", "--family", "jax", *argv,
                               "--as-of", when], cwd=root, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        if done.returncode != 0:
            return " ".join(argv), f"exit {done.returncode}: {done.stderr.strip()[-120:]}", subject
        ours = {path: (root / path).read_text() if (root / path).exists() else None for path in FILES}
    wrong = [f"{k}: {values(ours).get(k)} (theirs {new.get(k)})" for k in KEYS if values(ours).get(k) != new.get(k)]
    if headings(ours["CHANGELOG.md"]) != headings(after["CHANGELOG.md"]):
        wrong.append(f"headings {headings(ours['CHANGELOG.md'])[:2]} (theirs {headings(after['CHANGELOG.md'])[:2]})")
    return " ".join(argv), "; ".join(wrong) or "same", subject


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jax", type=Path, required=True, help="a jax git repository with its history")
    parser.add_argument("--since", default="2025-01-01", help="commits from this date on (default 2025-01-01)")
    parser.add_argument("--from-index", action="store_true",
                        help="post-release bumps without --release-date: the index says the version was released "
                             "and when (as in a tagless checkout)")
    args = parser.parse_args()
    log = git(args.jax, "log", f"--since={args.since}", "--format=%h%x09%s", "--", "jax/version.py")
    rows = []
    for line in log.splitlines():
        commit, subject = line.split("\t", 1)
        if POST.search(subject) or PREPARE.search(subject):
            rows.append((commit, *replay(args.jax, commit, subject, args.from_index)))
    width = max((len(r[1]) for r in rows), default=10)
    for commit, argv, result, subject in rows:
        print(f"{commit}  {argv:<{width}}  {result}  ({subject[:50]})")
    same = sum(r[2] == "same" for r in rows)
    values_same = sum(r[2] == "same" or r[2].startswith("headings") for r in rows)
    print(f"{same} of {len(rows)} commits reproduced whole (version values and changelog headings); "
          f"{values_same} of {len(rows)} in every version value")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
