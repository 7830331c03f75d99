"""``jaxrel release bump --family jax`` reproduces jax's own version commits, value for value.

Each case is one of the jax maintainers' commits found with ``git log -- jax/version.py``: a
post-release commit ("Update version numbers after …", "Postrelease …", "Updates after JAX
release …") or a "Prepare for JAX release" commit. The tree here is a small replica written for
the test (not jax's files): ``jax/version.py``, ``setup.py`` and ``CHANGELOG.md`` holding the values
and the changelog shape of the commit's parent, as measured in jax's history. The bump runs as CI
runs it (``python -m jaxrel``) and must leave every version value, and the changelog's headings,
as the maintainers' commit did. ``scripts/jax_bump_history.py`` runs the same comparison on a jax
git checkout itself (see docs/release.md for the measured run).
"""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from recorded_index import LISTINGS, Recorded

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Commit:
    """One maintainers' commit: the values at its parent and after it, and how its CHANGELOG looked."""

    commit: str
    argv: tuple[str, ...]
    before: dict[str, str]  # _version, _minimum_jaxlib_version, _current_jaxlib_version, _latest_jaxlib_version_on_pypi
    after: dict[str, str]
    changelog_before: tuple[str, ...]  # the release headings at the top, as the parent had them
    changelog_after: tuple[str, ...]


def _values(version: str, minimum: str, current: str, latest: str) -> dict[str, str]:
    return {"_version": version, "_minimum_jaxlib_version": minimum, "_current_jaxlib_version": current,
            "_latest_jaxlib_version_on_pypi": latest}


COMMITS = [
    Commit("8e784c546d", ("0.11.0", "--release-date", "2026-06-17"),  # "Updates after JAX release 0.10.2"
           _values("0.10.2", "0.10.1", "0.10.1", "0.10.1"), _values("0.11.0", "0.10.1", "0.10.2", "0.10.2"),
           ("Unreleased", "JAX 0.10.1 (May 20, 2026)"),
           ("Unreleased", "JAX 0.10.2 (June 17, 2026)", "JAX 0.10.1 (May 20, 2026)")),
    Commit("5b9d90af12", ("0.9.2", "--release-date", "2026-03-02"),  # "Postrelease JAX v0.9.1."
           _values("0.9.1", "0.9.1", "0.9.1", "0.9.0"), _values("0.9.2", "0.9.1", "0.9.1", "0.9.1"),
           ("JAX 0.9.1", "JAX 0.9.0 (January 20, 2026)"),
           ("Unreleased", "JAX 0.9.1 (March 2, 2026)", "JAX 0.9.0 (January 20, 2026)")),
    Commit("66ebbbb202", ("0.9.1", "--release-date", "2026-01-20"),  # "Postrelease JAX v0.9.0."
           _values("0.9.0", "0.9.0", "0.9.0", "0.8.2"), _values("0.9.1", "0.9.0", "0.9.0", "0.9.0"),
           ("Unreleased", "JAX 0.9.0 (TODO)", "JAX 0.8.2 (December 18, 2025)"),
           ("Unreleased", "JAX 0.9.0 (January 20, 2026)", "JAX 0.8.2 (December 18, 2025)")),
    Commit("feab6f4b7b", ("0.6.3", "--release-date", "2025-06-17"),  # "Postrelease (0.6.2) changes"
           _values("0.6.2", "0.6.2", "0.6.2", "0.6.1"), _values("0.6.3", "0.6.2", "0.6.2", "0.6.2"),
           ("Unreleased", "JAX 0.6.1 (May 21, 2025)"),
           ("Unreleased", "JAX 0.6.2 (June 17, 2025)", "JAX 0.6.1 (May 21, 2025)")),
    Commit("7e9c7e6942", ("0.6.2", "--release-date", "2025-05-21"),  # "Update version numbers after 0.6.1 release."
           _values("0.6.1", "0.6.1", "0.6.1", "0.6.0"), _values("0.6.2", "0.6.1", "0.6.1", "0.6.1"),
           ("JAX 0.6.1", "JAX 0.6.0 (April 16, 2025)"),
           ("Unreleased", "JAX 0.6.1 (May 21, 2025)", "JAX 0.6.0 (April 16, 2025)")),
    Commit("fbd6db3f11", ("0.6.1", "--release-date", "2025-04-16"),  # "Update version numbers after release."
           _values("0.6.0", "0.6.0", "0.6.0", "0.6.0"), _values("0.6.1", "0.6.0", "0.6.0", "0.6.0"),
           ("JAX 0.6.0", "JAX 0.5.3 (March 19, 2025)"),
           ("Unreleased", "JAX 0.6.0 (April 16, 2025)", "JAX 0.5.3 (March 19, 2025)")),
    Commit("a1521744c6", ("0.11.0", "--minimum-backend", "0.11.0"),  # "Prepare for JAX release 0.11.0"
           _values("0.11.0", "0.10.2", "0.10.2", "0.10.2"), _values("0.11.0", "0.11.0", "0.11.0", "0.10.2"),
           ("Unreleased", "JAX 0.10.2 (June 17, 2026)"), ("Unreleased", "JAX 0.10.2 (June 17, 2026)")),
    Commit("a659757d76", ("0.9.2", "--minimum-backend", "0.9.2"),  # "Prepare for JAX release 0.9.2"
           _values("0.9.2", "0.9.1", "0.9.1", "0.9.1"), _values("0.9.2", "0.9.2", "0.9.2", "0.9.1"),
           ("Unreleased", "JAX 0.9.1 (March 2, 2026)"), ("Unreleased", "JAX 0.9.1 (March 2, 2026)")),
]


def _replica(root: Path, values: dict[str, str], headings: tuple[str, ...]) -> None:
    """A tree shaped like jax's where the release reads and writes (written here, not copied from jax)."""
    (root / "jax").mkdir(parents=True)
    (root / "jax" / "version.py").write_text(
        "# The version of the frontend (a replica of the shape jax uses).\n\nimport os\n\n"
        f"_version = \"{values['_version']}\"\n\n"
        "# Overwritten by the build for nightly and rc wheels; never committed.\n"
        "_release_version: str | None = None\n\n"
        f"_minimum_jaxlib_version = '{values['_minimum_jaxlib_version']}'\n")
    (root / "setup.py").write_text(
        "project_name = 'jax'\n\n"
        f"_current_jaxlib_version = '{values['_current_jaxlib_version']}'\n\n"
        "# The following should be updated after each new jaxlib release.\n"
        f"_latest_jaxlib_version_on_pypi = '{values['_latest_jaxlib_version_on_pypi']}'\n\n"
        "_libtpu_version = '0.0.40.*'\n\n"
        "extras_require = {'cuda12': ['jax-cuda12-plugin[with-cuda]'], 'cuda13': ['jax-cuda13-plugin[with-cuda]']}\n")
    notes = "".join(f"## {heading}\n\n* Changes:\n  * something about {i}.\n\n" for i, heading in enumerate(headings))
    (root / "CHANGELOG.md").write_text("# Change log\n\n<!--\nRemember to align the items.\n-->\n\n" + notes)
    (root / "pyproject.toml").write_text("[project]\nname = 'jax'\ndynamic = ['version', 'dependencies']\n")


def _read(root: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    text = (root / "jax" / "version.py").read_text() + (root / "setup.py").read_text()
    values = dict(re.findall(r"^(_version|_minimum_jaxlib_version|_current_jaxlib_version|"
                             r"_latest_jaxlib_version_on_pypi) = ['\"]([^'\"]+)['\"]", text, re.M))
    headings = tuple(re.findall(r"^## (.+)$", (root / "CHANGELOG.md").read_text(), re.M))
    return values, headings


@pytest.mark.parametrize("commit", COMMITS, ids=[c.commit for c in COMMITS])
def test_bump_reproduces_the_maintainers_commit(commit: Commit, tmp_path: Path) -> None:
    _replica(tmp_path, commit.before, commit.changelog_before)
    assert _read(tmp_path) == (commit.before, commit.changelog_before)
    done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "bump", "--family", "jax", *commit.argv],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    values, headings = _read(tmp_path)
    assert values == commit.after, done.stdout
    assert headings[:len(commit.changelog_after)] == commit.changelog_after, headings
    assert "_release_version: str | None = None" in (tmp_path / "jax" / "version.py").read_text()


def test_nightly_and_rc_are_stamped_for_the_build_not_committed(tmp_path: Path) -> None:
    """jax stamps nightly and rc versions at build time (``_release_version``); ``_version`` stays the release's."""
    _replica(tmp_path, COMMITS[0].after, COMMITS[0].changelog_after)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x",
                    "--date", "2026-07-01T12:00:00Z"], cwd=tmp_path, check=True,
                   env={"GIT_COMMITTER_DATE": "2026-07-01T12:00:00Z", "PATH": "/usr/bin:/bin"})
    for option, expected in (("--nightly", '_release_version: str | None = "0.11.0.dev20260701"'),
                             ("--rc", '_release_version: str | None = "0.11.0rc1"')):
        (tmp_path / "jax" / "version.py").write_text((tmp_path / "jax" / "version.py").read_text().replace(
            '"0.11.0.dev20260701"', "None"))
        done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "bump", "--family", "jax", option],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        text = (tmp_path / "jax" / "version.py").read_text()
        assert expected in text and '_version = "0.11.0"' in text, text


def test_the_libtpu_pin_moves_when_given_and_only_then(tmp_path: Path) -> None:
    """``_libtpu_version`` is libtpu's own numbering (the tpu extra's pin): "Prepare for JAX release 0.10.1" moved it
    to '0.0.41.*'. ``--pin libtpu=V`` moves it with the rest of the bump; without it, it stays."""
    commit = next(c for c in COMMITS if c.argv[0] == "0.11.0")
    _replica(tmp_path, commit.before, commit.changelog_before)

    def bump(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jaxrel", "release", "bump", "--family", "jax", *argv],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})

    done = bump(*commit.argv, "--pin", "libtpu=0.0.41.*")
    assert done.returncode == 0, done.stderr
    setup = (tmp_path / "setup.py").read_text()
    assert "_libtpu_version = '0.0.41.*'" in setup and _read(tmp_path)[0] == commit.after
    for bad, says in (("libtpu=banana", "not a PEP 440 version"), ("jaxlib=0.1", "moves with the release"),
                      ("nothing", "expected NAME=VERSION"), ("libtpu=0.0.42.*\n", "spaces or control characters")):
        refused = bump("--pin", bad)
        assert refused.returncode == 2 and says in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, \
            refused.stderr
    assert (tmp_path / "setup.py").read_text() == setup


POST_RELEASE = [c for c in COMMITS if "--release-date" in c.argv]


@pytest.fixture(scope="module")
def recorded() -> Iterator[Recorded]:
    server = Recorded()
    yield server
    server.close()


def _tagless(root: Path, commit: Commit, *tags: str) -> None:
    """The replica of ``commit``'s parent as a git checkout, as CI's default depth-1 clone has it: no tags (or
    ``tags``, made on its one commit)."""
    _replica(root, commit.before, commit.changelog_before)
    env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_DATE": "2026-07-01T12:00:00Z",
           "GIT_COMMITTER_DATE": "2026-07-01T12:00:00Z"}
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                 *(["tag", tag] for tag in tags)):
        subprocess.run(["git", *argv], cwd=root, check=True, env=env)


def _bump(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jaxrel", "release", "bump", "--family", "jax", *argv], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "JAXREL_CACHE_DIR": str(root / ".c")})


def _first_upload(version: str) -> datetime.date:
    names = (f"jax-{version}.tar.gz", f"jax-{version}-py3-none-any.whl")
    files = [f for f in LISTINGS["jax"] if f["filename"] in names and f["upload-time"]]
    return min(datetime.datetime.fromisoformat(f["upload-time"].replace("Z", "+00:00")) for f in files).date()


@pytest.mark.parametrize("commit", POST_RELEASE, ids=[c.commit for c in POST_RELEASE])
def test_a_tagless_checkout_asks_the_index_and_writes_the_maintainers_values(commit: Commit, tmp_path: Path,
                                                                            recorded: Recorded) -> None:
    """Without tags and without --release-date, the recorded index says the declared version was released (and
    when): the post-release bump, as with the tag. Before, a tagless tree took the "renumbered" path silently."""
    _tagless(tmp_path, commit)
    done = _bump(tmp_path, commit.argv[0], "--index-url", recorded.url)
    assert done.returncode == 0, done.stderr
    values, headings = _read(tmp_path)
    assert values == commit.after, done.stdout
    released = commit.before["_version"]
    day = _first_upload(released)
    dated = f"JAX {released} ({day:%B} {day.day}, {day.year})"
    assert headings[:3] == ("Unreleased", dated, *commit.changelog_after[2:3]), headings
    # the index's first upload is the maintainers' date for all but 0.6.0, uploaded at 00:00 UTC on April 17
    assert (dated == commit.changelog_after[1]) is (released != "0.6.0"), (dated, commit.changelog_after[1])


def test_whether_it_was_released_is_never_chosen_silently(tmp_path: Path, recorded: Recorded) -> None:
    commit = POST_RELEASE[0]  # the declared version 0.10.2, released
    unreachable = "http://127.0.0.1:9/simple/"
    _tagless(tmp_path / "offline", commit)  # no tags, no index: refused with the fix, nothing written
    before = _read(tmp_path / "offline")
    done = _bump(tmp_path / "offline", "0.11.0", "--index-url", unreachable)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot tell whether jax 0.10.2 was released: the checkout has no release tags" in done.stderr
    assert "git fetch --tags" in done.stderr and "--released 0.10.2" in done.stderr
    assert _read(tmp_path / "offline") == before
    said = _bump(tmp_path / "offline", "0.11.0", "--index-url", unreachable, "--released", "0.10.2")
    assert said.returncode == 0, said.stderr
    assert _read(tmp_path / "offline")[0] == commit.after

    _tagless(tmp_path / "stale", commit, "jax-v0.10.1")  # release tags, but not the newest: the index disagrees
    done = _bump(tmp_path / "stale", "0.11.0", "--index-url", recorded.url)
    assert done.returncode == 2 and "the tag jax-v0.10.2 is not among this checkout's release tags; the index holds " \
                                   "jax 0.10.2" in done.stderr and "git fetch --tags" in done.stderr, done.stderr
    _tagless(tmp_path / "tagged", commit, "jax-v0.10.2")  # the tag alone answers when the index cannot
    assert _bump(tmp_path / "tagged", "0.11.0", "--index-url", unreachable).returncode == 0
    assert _read(tmp_path / "tagged")[0] == commit.after

    _tagless(tmp_path / "renumbered", commit)
    done = _bump(tmp_path / "renumbered", "0.11.0", "--index-url", unreachable, "--released", "none")
    assert done.returncode == 0, done.stderr
    values = _read(tmp_path / "renumbered")[0]
    assert values["_version"] == "0.11.0" and values["_latest_jaxlib_version_on_pypi"] == "0.10.1", values
    for bad, says in ((["--released", "0.10.1"], "the tree declares 0.10.2"), (["--released", "latest"],
                      "--released 'latest' is not a PEP 440 version"),
                      (["--released", "none", "--release-date", "2026-06-17"], "give one")):
        _tagless(tmp_path / "bad", commit)
        refused = _bump(tmp_path / "bad", "0.11.0", "--index-url", unreachable, *bad)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
        shutil.rmtree(tmp_path / "bad")


def test_plan_and_check_judge_a_release_commit_the_same_with_or_without_its_tag(tmp_path: Path,
                                                                               recorded: Recorded) -> None:
    """``release plan``/``check`` on the commit of a release judge the index as of that commit: told by the tag where
    the checkout has it, by the index's first upload of the version where it has none (CI's tagless clone)."""
    from jaxrel.distributions.index import Index
    from jaxrel.release.project import open_project
    from jaxrel.release.released import ReleasedError, judged_as_of

    commit = next(c for c in COMMITS if c.commit == "feab6f4b7b")  # its parent declares 0.6.2, uploaded 23:10 UTC
    index = Index.from_pip(recorded.url)
    moments = {}
    release_day, next_day = "2025-06-17T20:00:00Z", "2025-06-18T09:00:00Z"
    for name, tags, when in (("tagless", (), release_day), ("tagged", ("jax-v0.6.2",), release_day),
                             ("later", (), next_day), ("stale", ("jax-v0.6.1",), release_day)):
        root = tmp_path / name
        _replica(root, commit.before, commit.changelog_before)
        env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                     *(["tag", tag] for tag in tags)):
            subprocess.run(["git", *argv], cwd=root, check=True, env=env)
        with open_project(root, "jax") as project:
            if name == "stale":
                with pytest.raises(ReleasedError, match="git fetch --tags"):
                    judged_as_of(project, "0.6.2", index)
                continue
            moments[name] = judged_as_of(project, "0.6.2", index)
    assert moments["tagless"][0] == moments["tagged"][0] == datetime.datetime(2025, 6, 17, 20, tzinfo=datetime.UTC)
    assert "first upload (2025-06-17T23:10:25Z)" in moments["tagless"][1] and "HEAD is the tag" in moments["tagged"][1]
    assert moments["later"] == (None, ""), "a tree past the release is judged by today's index"
