"""Build the bisect lab: real jax history with one compat regression inserted in the middle of a range.

A private clone of a jax git mirror (sparse checkout of ``jax/ jaxlib/ tests/ build/``: the
mirror lacks a few blobs elsewhere) gets one new commit ``I`` on top of the first-parent commit
``M`` in the middle of ``GOOD..BAD``. ``I`` makes ``jax._src.api_util.resolve_kwargs`` use
``jaxlib._jax.RawBuffer`` with no ``jaxlib_extension_version`` gate: jaxlib 0.11.1 (API 480) has
it, jaxlib 0.11.0 (API 477) does not, so on 0.11.0 the real tests
``tests/api_util_test.py::ApiUtilTest::test_resolve_kwargs*`` fail with an AttributeError.

Every descendant of ``M`` in the range is then rewritten with plumbing (``git commit-tree``,
authors, committers, dates and messages kept): its parents mapped (``M`` becomes ``I``), its
tree the original one with the same edit applied. Commits that do not descend from ``M`` (side
branches forked earlier) keep their hashes, and every merge stays a merge with the same
parents, so the history keeps its shape. Fixed dates make the rewrite deterministic: a redo
gives the same hashes.

Refs in the lab: ``lab`` (checked out; the rewritten BAD), ``main`` (the real BAD); tags
``lab-good`` (GOOD), ``lab-inserted`` (I), ``lab-bad`` and ``real-bad``.

    python scripts/make_bisect_lab.py --mirror JAX_GIT --lab DIR [--good REV] [--bad REV] [--json]

JAX_GIT is a jax git repository with full history (a clone or mirror of github:jax-ml/jax whose
HEAD, or --bad, is cec06d116c); DIR is replaced.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# jax's own "Release JAX v0.11.0" post-release merge (version 0.11.1, minimum jaxlib 0.11.0) and
# the mirror's HEAD (jax 0.11.1, minimum jaxlib 0.11.0): 487 commits, 95 of them merges.
GOOD = "56c7e2b0c672c73cea11f12267cfc886476ce90a"
BAD = "cec06d116c"
BACKEND = "0.11.0"  # the older admitted jaxlib; it must be admitted all along the range
SPARSE = ("jax", "jaxlib", "tests", "build")

PATH = "jax/_src/api_util.py"
IMPORT_ANCHOR = "from jax._src import traceback_util\n"
IMPORT_LINE = "from jax._src.lib import _jax\n"
BODY_ANCHOR = "  ba = inspect.signature(fun).bind(*args, **kwargs)\n"
BODY_LINES = (
    "  if any(isinstance(a, _jax.RawBuffer) for a in (*args, *kwargs.values())):\n"
    '    raise TypeError("a raw device buffer (Array.unsafe_raw_buffer()) is not a "\n'
    '                    "valid argument; pass the array itself")\n'
)
SUBJECT = "resolve_kwargs: refuse a raw device buffer as an argument"
MESSAGE = f"""{SUBJECT}

Inserted by jaxrel's scripts/make_bisect_lab.py into real jax history: it uses
jaxlib._jax.RawBuffer (jaxlib_extension_version 480, jaxlib 0.11.1) with no
version gate, while this revision still admits jaxlib 0.11.0 (version 477),
which lacks it. tests/api_util_test.py::ApiUtilTest::test_resolve_kwargs
fails there with an AttributeError.
"""
LAB_AUTHOR = ("jaxrel bisect lab", "bisect-lab@jaxrel.invalid")


def git(repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, input=stdin,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args[:3])}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def edit(text: str, where: str) -> str:
    """``text`` of jax/_src/api_util.py with the ungated RawBuffer use; refuses if an anchor moved."""
    for anchor in (IMPORT_ANCHOR, BODY_ANCHOR):
        if text.count(anchor) != 1:
            sys.exit(f"{PATH} at {where}: expected the line {anchor.strip()!r} once, found it "
                     f"{text.count(anchor)} times; choose another range (--good/--bad)")
    text = text.replace(IMPORT_ANCHOR, IMPORT_ANCHOR + IMPORT_LINE)
    return text.replace(BODY_ANCHOR, BODY_LINES + BODY_ANCHOR)


def version_rules(repo: Path, rev: str) -> tuple[str, str]:
    text = git(repo, "show", f"{rev}:jax/version.py")
    version = re.search(r'^_version\s*=\s*"([^"]+)"', text, re.M)
    minimum = re.search(r"^_minimum_jaxlib_version\s*=\s*'([^']+)'", text, re.M)
    if not version or not minimum:
        sys.exit(f"jax/version.py at {rev}: no _version or _minimum_jaxlib_version")
    return version[1], minimum[1]


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"[0-9]+(?:\.[0-9]+)*", version)[0].split("."))  # type: ignore[index]


def commit_fields(repo: Path, rev: str) -> tuple[list[str], dict[str, str], str]:
    """Parents, the author/committer environment for ``git commit-tree``, and the raw message."""
    raw = git(repo, "cat-file", "commit", rev)
    header, _, message = raw.partition("\n\n")
    parents, env = [], {}
    for line in header.splitlines():
        key, _, value = line.partition(" ")
        if key == "parent":
            parents.append(value)
        elif key in ("author", "committer"):
            person = re.match(r"(.*) <(.*)> (\d+ [+-]\d{4})$", value)
            if not person:
                sys.exit(f"commit {rev}: cannot read its {key} line {value!r}")
            who = "AUTHOR" if key == "author" else "COMMITTER"
            env |= {f"GIT_{who}_NAME": person[1], f"GIT_{who}_EMAIL": person[2], f"GIT_{who}_DATE": person[3]}
    return parents, env, message


def edited_tree(repo: Path, rev: str, index: Path, blobs: dict[str, str]) -> str:
    """The tree of ``rev`` with :func:`edit` applied to ``PATH`` (edited blobs cached by blob id)."""
    old = git(repo, "rev-parse", f"{rev}:{PATH}").strip()
    if old not in blobs:
        new_text = edit(git(repo, "cat-file", "blob", old), rev[:12])
        blobs[old] = git(repo, "hash-object", "-w", "--stdin", "--path", PATH, stdin=new_text).strip()
    env = {"GIT_INDEX_FILE": str(index)}
    git(repo, "read-tree", f"{rev}^{{tree}}", env=env)
    git(repo, "update-index", "--cacheinfo", f"100644,{blobs[old]},{PATH}", env=env)
    return git(repo, "write-tree", env=env).strip()


def clone(mirror: Path, lab: Path) -> None:
    if lab.exists():
        shutil.rmtree(lab)
    lab.parent.mkdir(parents=True, exist_ok=True)
    git(lab.parent, "clone", "--quiet", "--no-checkout", str(mirror), str(lab))
    git(lab, "sparse-checkout", "set", "--cone", *SPARSE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True, help="a jax git repository with full history")
    parser.add_argument("--lab", type=Path, required=True, help="the private clone to (re)create")
    parser.add_argument("--good", default=GOOD)
    parser.add_argument("--bad", default=BAD)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    timings: dict[str, float] = {}

    clone(args.mirror, args.lab)
    lab = args.lab
    good = git(lab, "rev-parse", "--verify", f"{args.good}^{{commit}}").strip()
    bad = git(lab, "rev-parse", "--verify", f"{args.bad}^{{commit}}").strip()
    timings["clone"] = time.perf_counter() - started

    step = time.perf_counter()
    commits = git(lab, "rev-list", f"{good}..{bad}").split()
    merges = git(lab, "rev-list", "--merges", f"{good}..{bad}").split()
    first_parent = git(lab, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    rules = {rev: version_rules(lab, rev) for rev in [good, *commits]}
    refused = [rev for rev, (version, minimum) in rules.items()
               if not as_tuple(minimum) <= as_tuple(BACKEND) <= as_tuple(version)]
    if refused:
        sys.exit(f"{len(refused)} revisions of {good[:12]}..{bad[:12]} refuse jaxlib {BACKEND} "
                 f"(first {refused[0][:12]}: jax {rules[refused[0]][0]}, minimum {rules[refused[0]][1]}); "
                 "choose another range")
    timings["check_range"] = time.perf_counter() - step

    step = time.perf_counter()
    middle = first_parent[len(first_parent) // 2 - 1]
    descendants = git(lab, "rev-list", "--topo-order", "--reverse", "--ancestry-path", f"{middle}..{bad}").split()
    blobs: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        _, middle_env, _ = commit_fields(lab, middle)
        stamp = str(int(middle_env["GIT_COMMITTER_DATE"].split()[0]) + 60) + " +0000"
        lab_env = {"GIT_AUTHOR_NAME": LAB_AUTHOR[0], "GIT_AUTHOR_EMAIL": LAB_AUTHOR[1], "GIT_AUTHOR_DATE": stamp,
                   "GIT_COMMITTER_NAME": LAB_AUTHOR[0], "GIT_COMMITTER_EMAIL": LAB_AUTHOR[1],
                   "GIT_COMMITTER_DATE": stamp}
        inserted = git(lab, "commit-tree", edited_tree(lab, middle, index, blobs), "-p", middle,
                       env=lab_env, stdin=MESSAGE).strip()
        mapped = {middle: inserted}
        for rev in descendants:
            parents, env, message = commit_fields(lab, rev)
            parent_args = [arg for p in parents for arg in ("-p", mapped.get(p, p))]
            mapped[rev] = git(lab, "commit-tree", edited_tree(lab, rev, index, blobs), *parent_args,
                              env=env, stdin=message).strip()
    lab_bad = mapped[bad]
    timings["rewrite"] = time.perf_counter() - step

    step = time.perf_counter()
    git(lab, "update-ref", "refs/heads/main", bad)
    git(lab, "update-ref", "refs/heads/lab", lab_bad)
    for tag, rev in (("lab-good", good), ("lab-inserted", inserted), ("lab-bad", lab_bad), ("real-bad", bad)):
        git(lab, "tag", "-f", tag, rev)
    git(lab, "checkout", "--quiet", "lab")
    timings["checkout"] = time.perf_counter() - step

    lab_commits = git(lab, "rev-list", f"{good}..{lab_bad}").split()
    lab_merges = git(lab, "rev-list", "--merges", f"{good}..{lab_bad}").split()
    changed = git(lab, "diff", "--name-only", bad, lab_bad).split()
    kept = len(set(commits) & set(lab_commits))
    if len(lab_commits) != len(commits) + 1 or len(lab_merges) != len(merges) or changed != [PATH]:
        sys.exit(f"the rewrite changed the history's shape: {len(commits)} -> {len(lab_commits)} commits, "
                 f"{len(merges)} -> {len(lab_merges)} merges, files differing at the tip: {changed}")
    timings["total"] = time.perf_counter() - started
    summary = {
        "lab": str(lab), "mirror": str(args.mirror), "good": good, "real_bad": bad, "lab_bad": lab_bad,
        "inserted": inserted, "inserted_parent": middle, "subject": SUBJECT,
        "commits_real": len(commits), "merges": len(merges), "first_parent": len(first_parent),
        "commits_lab": len(lab_commits), "rewritten": len(descendants), "kept": kept,
        "versions": sorted({f"jax {v}, minimum jaxlib {m}" for v, m in rules.values()}),
        "seconds": {k: round(v, 2) for k, v in timings.items()},
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"lab {lab}: {good[:12]}..{lab_bad[:12]} = {len(lab_commits)} commits ({len(merges)} merges), "
              f"real range {good[:12]}..{bad[:12]} = {len(commits)}")
        print(f"inserted {inserted[:12]} {SUBJECT!r} on {middle[:12]} (first-parent {len(first_parent) // 2} "
              f"of {len(first_parent)}); {len(descendants)} descendants rewritten, {kept} commits kept")
        print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
