"""``release bump`` and ``release check`` on a fresh git copy of the splitfam sample (offline:
the index is an empty wheelhouse, so nothing counts as released but what the plan releases)."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxrel.cli import main
from jaxrel.distributions.index import Index
from jaxrel.release import bump, check, pins, plan
from jaxrel.release.locations import LocationError
from jaxrel.release.project import Project, open_project

TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "splitfam"
COMMIT_TIME = "2026-03-04T23:30:00+00:00"  # 2026-03-05 in UTC+1, 2026-03-04 in UTC


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": COMMIT_TIME, "GIT_COMMITTER_DATE": COMMIT_TIME}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "splitfam"
    shutil.copytree(TEMPLATE, root)
    (root / ".gitignore").write_text("dist/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "0.1.0")
    return root


@pytest.fixture
def project(repo: Path) -> Iterator[Project]:
    with open_project(repo) as opened:
        yield opened


def offline(tmp_path: Path) -> Index:
    house = tmp_path / "wheelhouse"
    house.mkdir(exist_ok=True)
    return Index([], [house], cache=tmp_path / "cache")


def checks_of(project: Project, tmp_path: Path, version: str | None = None) -> dict[str, check.Check]:
    made = plan.make_plan(project, version, offline(tmp_path))
    return {c.name: c for c in check.run_checks(project, made)}


def test_next_version() -> None:
    day = datetime.date(2026, 3, 4)
    assert bump.next_version("0.1.0", "0.2.0", "release") == "0.2.0"
    assert bump.next_version("0.2.0rc1", None, "release") == "0.2.0"
    assert bump.next_version("0.1.0", "0.2.0", "rc") == "0.2.0rc1"
    assert bump.next_version("0.2.0rc1", None, "rc") == "0.2.0rc2"
    assert bump.next_version("0.2.0rc1", "0.3.0", "rc") == "0.3.0rc1"
    assert bump.next_version("0.2.0", "0.2.1", "nightly", day) == "0.2.1.dev20260304"
    with pytest.raises(bump.BumpError, match="plain X.Y.Z"):
        bump.next_version("0.1.0", "0.2.0rc1", "rc")


def test_nightly_uses_the_last_commits_utc_date(project: Project) -> None:
    assert bump.commit_date(project) == datetime.date(2026, 3, 4)
    changes = bump.plan_bump(project, "0.2.0", kind="nightly")
    assert {c.new for c in changes.changes if c.key in ("_version", "VERSION", "project.version")} == {
        "0.2.0.dev20260304"}


def test_fresh_sample_passes_every_check(project: Project, tmp_path: Path) -> None:
    found = checks_of(project, tmp_path)
    assert [n for n, c in found.items() if c.status != check.PASS] == []
    assert "pin:splitfam-cpu-plugin" in found and "frontend-requires-backend-range" in found


def test_bump_moves_every_declared_file_and_the_pins(repo: Path, project: Project, tmp_path: Path) -> None:
    changes = bump.plan_bump(project, "0.2.0")
    bump.apply(project, changes)
    moved = {(c.file, c.key): (c.old, c.new) for c in changes.changes}
    assert moved == {
        ("core/splitfam_core/version.py", "_version"): ("0.1.0", "0.2.0"),
        ("core/version.bzl", "VERSION"): ("0.1.0", "0.2.0"),
        ("plugin/splitfam_cpu_plugin/version.py", "_version"): ("0.1.0", "0.2.0"),
        ("plugin/pyproject.toml", "project.version"): ("0.1.0", "0.2.0"),
        ("frontend/splitfam/version.py", "_version"): ("0.1.0", "0.2.0"),
        ("frontend/pyproject.toml", "project.version"): ("0.1.0", "0.2.0"),
        ("frontend/pyproject.toml", "project.dependencies[splitfam-core]"): ("<=0.1.0,>=0.1.0", ">=0.1.0,<=0.2.0"),
        ("plugin/pyproject.toml", "project.dependencies[splitfam-core]"): ("==0.1.0", "==0.2.0"),
    }
    assert 'VERSION = "0.2.0"' in (repo / "core/version.bzl").read_text()
    with open_project(repo) as again:
        assert {again.version_of(c) for c in again.release.components} == {"0.2.0"}
        found = checks_of(again, tmp_path)
    assert found["git-clean"].status == check.FAIL  # the bump is not committed yet
    assert found["changelog"].status == check.FAIL and "## 0.2.0" in (found["changelog"].fix or "")
    # 0.1.0 was never released (empty index), and this release no longer carries it:
    assert found["rule:minimum-is-released"].status == check.FAIL


def test_minimum_backend_moves_the_frontend_range(repo: Path, project: Project) -> None:
    bump.apply(project, bump.plan_bump(project, "0.3.0"))
    with open_project(repo) as again:
        changes = bump.plan_bump(again, None, minimum_backend="0.2.0")
        bump.apply(again, changes)
    assert [(c.key, c.new) for c in changes.changes] == [
        ("_minimum_core_version", "0.2.0"), ("project.dependencies[splitfam-core]", ">=0.2.0,<=0.3.0")]
    with pytest.raises(bump.BumpError, match="newer than the frontend"):
        with open_project(repo) as again:
            bump.plan_bump(again, None, minimum_backend="0.4.0")


def test_bump_refuses_going_back_and_writes_nothing(repo: Path, project: Project) -> None:
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    with pytest.raises(bump.BumpError, match="older than the current"):
        bump.plan_bump(project, "0.0.9")
    (repo / "plugin/pyproject.toml").write_text("[project]\nname = 'x'\n")  # a broken location, found mid-bump
    with pytest.raises(LocationError, match="no key 'project.version'"):
        bump.plan_bump(project, "0.2.0")
    assert main(["release", "bump", "0.2.0", "--project", str(repo)]) == 2
    after = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert {p for p in after if after[p] != before[p]} == {repo / "plugin/pyproject.toml"}


def test_inconsistent_stamp_is_named_with_its_fix(repo: Path, project: Project, tmp_path: Path) -> None:
    stamp = repo / "core/version.bzl"
    stamp.write_text(stamp.read_text().replace('"0.1.0"', '"0.1.1"'))
    failed = checks_of(project, tmp_path)["versions:splitfam-core"]
    assert failed.status == check.FAIL
    assert "core/version.bzl:VERSION=0.1.1" in failed.detail and "_version=0.1.0" in failed.detail
    assert failed.fix == "jaxrel release bump 0.1.0 --component splitfam-core"


def test_backend_only_release_is_refused(repo: Path, project: Project, tmp_path: Path) -> None:
    bump.apply(project, bump.plan_bump(project, "0.2.0", components=["splitfam-core"]))
    with open_project(repo) as again:
        made = plan.make_plan(again, "0.2.0", offline(tmp_path))
        assert made.contents == "backend only"
        found = {c.name: c for c in check.run_checks(again, made)}
    refused = found["rule:backend-release-has-frontend-release"]
    assert refused.status == check.FAIL and "needs a splitfam release of the same version" in refused.detail


def test_pins_and_range_mismatches(repo: Path, project: Project, tmp_path: Path) -> None:
    plugin = repo / "plugin/pyproject.toml"
    plugin.write_text(plugin.read_text().replace("splitfam-core==0.1.0", "splitfam-core>=0.1.0"))
    frontend = repo / "frontend/pyproject.toml"
    frontend.write_text(frontend.read_text().replace("splitfam-core>=0.1.0,<=0.1.0", "splitfam-core>=0.1.0"))
    found = checks_of(project, tmp_path)
    assert found["pin:splitfam-cpu-plugin"].status == check.FAIL
    assert "not exactly 0.1.0" in found["pin:splitfam-cpu-plugin"].detail
    assert found["frontend-requires-backend-range"].status == check.FAIL
    assert "not exactly >=0.1.0,<=0.1.0" in found["frontend-requires-backend-range"].detail


def test_tag_checks(repo: Path, project: Project, tmp_path: Path) -> None:
    git(repo, "tag", "v0.1.0")
    assert checks_of(project, tmp_path)["tag-free"].status == check.PASS  # at HEAD: CI on the tag push
    (repo / "CHANGELOG.md").write_text((repo / "CHANGELOG.md").read_text() + "\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "later")
    tag = checks_of(project, tmp_path)["tag-free"]
    assert tag.status == check.FAIL and "already exists" in tag.detail


@pytest.mark.parametrize(("text", "version", "found"), [
    ("## 0.2.0\n", "0.2.0", True),
    ("# jax 0.2.0 (Nov 2026)\n", "0.2.0", True),
    ("## 0.2.0.1\n", "0.2.0", False),
    ("## 10.2.0\n", "0.2.0", False),
    ("- fixed in 0.2.0\n", "0.2.0", False),
    ("0.2.0\n=====\n", "0.2.0", True),
])
def test_changelog_heading(text: str, version: str, found: bool) -> None:
    assert check.changelog_has(text, version) is found


@pytest.mark.parametrize("heading", ["## jax 0.2.0 (TODO)", "## JAX 0.2.0 (tbd)", "## 0.2.0 ()",
                                     "## jax 0.2.0 (unreleased)"])
def test_a_placeholder_heading_fails_the_changelog_check(repo: Path, project: Project, tmp_path: Path,
                                                         heading: str) -> None:
    log = repo / "CHANGELOG.md"
    log.write_text(f"# Changelog\n\n{heading}\n\n- notes\n\n" + log.read_text())
    found = checks_of(project, tmp_path, "0.2.0")["changelog"]
    assert found.status == check.FAIL and "placeholder" in found.detail and heading in found.detail


def test_pins_exactly() -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    assert pins.pins_exactly(SpecifierSet("==0.2.0"), Version("0.2.0"))
    assert pins.pins_exactly(SpecifierSet(">=0.2.0,<=0.2.0"), Version("0.2.0"))
    assert not pins.pins_exactly(SpecifierSet(">=0.2.0"), Version("0.2.0"))
    assert not pins.pins_exactly(SpecifierSet("==0.2.*"), Version("0.2.0"))
    assert not pins.pins_exactly(SpecifierSet("==0.1.0"), Version("0.2.0"))


def test_cli_check_json_and_exit_code(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    house = tmp_path / "house"
    house.mkdir()
    assert main(["release", "check", str(repo), "--index-url", house.as_uri(), "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["plan"]["upload_order"] == ["splitfam-core", "splitfam-cpu-plugin", "splitfam"]
    (repo / "stray.txt").write_text("x")
    assert main(["release", "check", str(repo), "--index-url", house.as_uri()]) == 1
    assert "FAIL  git-clean" in capsys.readouterr().out


def test_malformed_version_in_a_file_is_one_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamp = repo / "core/version.bzl"
    stamp.write_text(stamp.read_text().replace('"0.1.0"', '"banana"'))
    for verb in ("plan", "check", "bump"):
        args = ["release", verb, *(["0.2.0", "--project", str(repo)] if verb == "bump" else
                                   [str(repo)] if verb == "check" else ["--project", str(repo)])]
        assert main(args) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "core/version.bzl: VERSION = 'banana' is not a PEP 440 version" in error


def test_a_tag_that_the_files_do_not_declare_is_refused(project: Project, tmp_path: Path) -> None:
    found = checks_of(project, tmp_path, version="0.5.0")
    assert found["release-version"].status == check.FAIL
    assert found["release-version"].detail == "releasing 0.5.0, but splitfam declares 0.1.0"
    assert checks_of(project, tmp_path)["release-version"].status == check.PASS


def test_bump_keeps_crlf_line_ends(repo: Path) -> None:
    stamp = repo / "core/version.bzl"
    stamp.write_bytes(stamp.read_bytes().replace(b"\n", b"\r\n"))
    with open_project(repo) as project:
        bump.apply(project, bump.plan_bump(project, "0.2.0"))
    data = stamp.read_bytes()
    assert b'VERSION = "0.2.0"\r\n' in data and data.count(b"\n") == data.count(b"\r\n")


def _digests(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.parts}


def test_bump_with_one_immutable_file_changes_nothing_and_exits_3(repo: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    locked = repo / "plugin" / "splitfam_cpu_plugin" / "version.py"
    made = subprocess.run(["chattr", "+i", str(locked)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {made.stderr.decode().strip()[:80]}")
    before = _digests(repo)
    try:
        code = main(["release", "bump", "0.2.0", "--project", str(repo)])
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=False)
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.count("\n") == 1 and "Traceback" not in err and "version.py" in err
    assert _digests(repo) == before, "all or nothing: no file of the bump was written"
    assert not [p for p in (repo / "plugin" / "splitfam_cpu_plugin").iterdir() if p.name.startswith(".")]


def test_extras_that_cannot_be_installed_fail_except_families_released_separately(
        repo: Path, tmp_path: Path) -> None:
    config = repo / "pyproject.toml"
    config.write_text(config.read_text().replace('''set = "cpu"
''', '''set = "cpu"

[[tool.jaxrel.plugins]]
distribution = "splitfam-gpu-plugin"

[[tool.jaxrel.plugins]]
distribution = "splitfam-rocm*"
pinned = false
released-separately = true
'''))
    frontend = repo / "frontend/pyproject.toml"
    frontend.write_text(frontend.read_text().replace('''[tool.setuptools''', '''[project.optional-dependencies]
cpu = ["splitfam-core>=0.1.0,<=0.1.0", "splitfam-cpu-plugin>=0.1.0,<=0.1.0"]
gpu = ["splitfam-gpu-plugin>=0.1.0,<=0.1.0"]
rocm = ["splitfam-rocm-plugin==0.1.0.*"]

[tool.setuptools'''))
    with open_project(repo) as project:
        made = plan.make_plan(project, None, offline(tmp_path))
        found = {c.name: c for c in check.run_checks(project, made, offline(tmp_path))}
    # the cpu plugin is part of this release: satisfiable; gpu is on no index and not released: a failure
    assert "extra:cpu" not in found
    assert found["extra:gpu"].status == check.FAIL
    assert "splitfam==0.1.0[gpu] cannot be installed" in found["extra:gpu"].detail
    assert "splitfam-gpu-plugin<=0.1.0,>=0.1.0" in found["extra:gpu"].detail
    # ROCm-like families come on their own schedule: a warning naming the release expected
    assert found["extra:rocm"].status == check.WARN
    assert "splitfam-rocm-plugin==0.1.0.*" in found["extra:rocm"].detail
    assert "warning(s)" in check.render(list(found.values()), made)


def test_a_version_file_linked_inside_the_tree_is_written_through_the_link(repo: Path) -> None:
    """Before, the bump replaced the link with a regular file: the file it pointed to kept the old version."""
    link = repo / "frontend" / "splitfam" / "version.py"
    shared = repo / "shared_version.py"
    shared.write_text(link.read_text())
    link.unlink()
    link.symlink_to(Path("..") / ".." / "shared_version.py")
    assert main(["release", "bump", "0.2.0", "--project", str(repo)]) == 0
    assert link.is_symlink() and link.resolve() == shared.resolve()
    assert '"0.2.0"' in shared.read_text()


@pytest.mark.parametrize(("hostile", "says", "code"), [
    ("symlink-out", "leads outside", 2),
    ("version-fifo", "version.py: a FIFO, not a regular file", 2),
    ("version-dangling", "version.py", 2),
    ("changelog-fifo", "CHANGELOG.md: not a regular file", 2),
    ("changelog-dir", "CHANGELOG.md: not a regular file", 2),
    ("newline", "'0.2.0\\n'", 2),
    ("space", "' 0.2.0'", 2),
    ("minimum-newline", "--minimum-backend '0.1.0\\n'", 2),
    ("minimum-word", "--minimum-backend 'latest' is not a PEP 440 version", 2),
    ("rc-minimum", "--rc stamps the build's version", 2),
])
def test_hostile_bumps_write_every_file_right_or_nothing(repo: Path, tmp_path: Path, hostile: str, says: str,
                                                         code: int, capsys: pytest.CaptureFixture[str]) -> None:
    version = "0.2.0"
    outside = tmp_path / "outside.py"
    if hostile == "symlink-out":
        target = repo / "frontend" / "splitfam" / "version.py"
        outside.write_text(target.read_text())
        target.unlink()
        target.symlink_to(outside)
    elif hostile in ("version-fifo", "version-dangling"):
        target = repo / "frontend" / "splitfam" / "version.py"
        target.unlink()
        os.mkfifo(target) if hostile == "version-fifo" else target.symlink_to(tmp_path / "gone.py")
    elif hostile == "changelog-fifo":
        (repo / "CHANGELOG.md").unlink()
        os.mkfifo(repo / "CHANGELOG.md")
    elif hostile == "changelog-dir":
        (repo / "CHANGELOG.md").unlink()
        (repo / "CHANGELOG.md").mkdir()
    elif hostile == "newline":
        version = "0.2.0\n"
    elif hostile == "space":
        version = " 0.2.0"
    extra = ["--minimum-backend", "0.1.0\n"] if hostile == "minimum-newline" else []
    if hostile in ("minimum-word", "rc-minimum"):  # a family keeping the next version: --rc stamps, nothing moves
        pyproject = repo / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('changelog = "CHANGELOG.md"\n', 'changelog = '
                             '"CHANGELOG.md"\nversioning = "next"\nstamped = ["frontend/splitfam/version.py:'
                             '_release_version"]\n'))
        version = "--rc" if hostile == "rc-minimum" else "0.2.0"
        extra = ["--minimum-backend", "latest" if hostile == "minimum-word" else "0.1.0"]
    if hostile.startswith("changelog"):
        extra = ["--release-date", "2026-03-04"]  # a post-release bump: the one that dates the changelog
    if hostile.startswith("changelog"):  # a family whose changelog the post-release bump dates, as jax's
        pyproject = repo / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('changelog = "CHANGELOG.md"\n', 'changelog = '
                             '"CHANGELOG.md"\nversioning = "next"\nchangelog-style = "unreleased"\n'))
    before = _digests(repo)
    outside_before = outside.read_bytes() if outside.exists() else None
    done = main(["release", "bump", version, "--project", str(repo), *extra])
    err = capsys.readouterr().err
    assert done == code, err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert _digests(repo) == before, "nothing of the bump was written"
    assert (outside.read_bytes() if outside.exists() else None) == outside_before, "nothing outside the tree changed"


def _next_family(repo: Path, changelog: str) -> None:
    """The sample as jax releases: the tree holds the next release, "Unreleased" on top of the changelog."""
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('changelog = "CHANGELOG.md"\n', 'changelog = "CHANGELOG.md"\n'
                         'versioning = "next"\nchangelog-style = "unreleased"\nchangelog-heading = "JAX {version} '
                         '({date})"\n'))
    (repo / "CHANGELOG.md").write_text(changelog)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "next")


@pytest.mark.parametrize(("changelog", "headings"), [
    # an existing heading keeps its text and gets the date, spelled as the newest dated heading spells one
    ("# Change log\n\n## jax 0.1.0\n\n- notes\n\n## jax 0.0.9 (Mar 4, 2025)\n",
     ["## Unreleased", "## jax 0.1.0 (Mar 4, 2026)", "## jax 0.0.9 (Mar 4, 2025)"]),
    ("# Change log\n\n## Unreleased\n\n## JAX 0.1.0 (TODO)\n\n- notes\n",
     ["## Unreleased", "## JAX 0.1.0 (March 4, 2026)"]),
    # notes under "Unreleased": the release's heading as the nearest precedent writes it
    ("# Change log\n\n## Unreleased\n\n- notes\n\n## jax 0.0.9 (Feb 24, 2025)\n",
     ["## Unreleased", "## jax 0.1.0 (Mar 4, 2026)", "## jax 0.0.9 (Feb 24, 2025)"]),
])
def test_the_post_release_bump_dates_the_heading_as_the_maintainers_wrote_it(repo: Path, changelog: str,
                                                                           headings: list[str]) -> None:
    _next_family(repo, changelog)
    git(repo, "tag", "v0.1.0")  # 0.1.0 was released: bumping past it is the post-release bump
    assert main(["release", "bump", "0.2.0", "--project", str(repo), "--release-date", "2026-03-04"]) == 0
    found = [line for line in (repo / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    assert found == headings


def test_an_untagged_declared_version_is_renumbered_not_released(repo: Path) -> None:
    """jax 0.8.3 was never released: "Prepare for JAX release 0.9.0" renumbered it; nothing gets dated."""
    changelog = "# Change log\n\n## Unreleased\n\n- notes\n"
    _next_family(repo, changelog)
    empty = repo.parent / "empty-index"  # an index without splitfam: 0.1.0 has no files there
    empty.mkdir()
    assert main(["release", "bump", "0.2.0", "--project", str(repo), "--minimum-backend", "0.2.0", "--index-url",
                 empty.as_uri()]) == 0
    assert (repo / "CHANGELOG.md").read_text() == changelog
    assert '_version = "0.2.0"' in (repo / "frontend" / "splitfam" / "version.py").read_text()
