"""Attestations beside a release: ``release verify`` checks each one names exactly its file and sha256.

The attestations are pypi-attestations documents signed offline with a test key
(tests/attestation_support.py); the wheels are the verify tests' own (bazel/wheel_builder.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from attestation_support import attest_with_test_key, attestation_json
from test_release_verify import FAMILY, release

from jaxrel.cli import main
from jaxrel.release import attest
from jaxrel.release.manifest import Artifact, Manifest, read
from jaxrel.release.verify import verify_dist


def problems(dist: Path) -> list[str]:
    return verify_dist(dist, FAMILY, run_twine=False).problems()


def files(dist: Path) -> list[Path]:
    return [dist / a.file for a in read(dist).artifacts]


def test_attestations_of_every_file_verify(tmp_path: Path) -> None:
    dist = release(tmp_path)
    for file in files(dist):
        attest_with_test_key(file)
    result = verify_dist(dist, FAMILY, run_twine=False)
    assert result.ok, result.problems()
    assert all("attestation" in report.checked for report in result.files)
    subject = attest.read_subject(attest.path_for(files(dist)[0]))
    assert subject.name == files(dist)[0].name and subject.predicate_type == attest.publish_predicate()


def test_a_renamed_attestation_names_another_file(tmp_path: Path) -> None:
    dist = release(tmp_path)
    core, plugin, _ = files(dist)
    attest_with_test_key(core)
    shutil.copyfile(attest.path_for(core), attest.path_for(plugin))  # core's attestation passed off as the plugin's
    [problem] = problems(dist)
    assert problem.startswith(f"{plugin.name}: attestation {plugin.name}.publish.attestation: its subject names "
                              f"{core.name}, not this file; its subject's sha256 ")
    assert problem.endswith("remove it and attest again (jaxrel release attest), or rebuild")


def test_an_altered_file_with_its_manifest_rehashed_is_caught(tmp_path: Path) -> None:
    """The manifest can be rewritten to match a changed file; the signed subject cannot."""
    dist = release(tmp_path)
    core = files(dist)[0]
    attest_with_test_key(core)
    with open(core, "ab") as handle:  # a byte after the zip's end: the archive still reads
        handle.write(b"\0")
    manifest = read(dist)
    rehashed = tuple(Artifact.of(dist / a.file, a.distribution, a.version, a.role) for a in manifest.artifacts)
    Manifest(manifest.family, manifest.version, manifest.tag, manifest.commit, rehashed).write(dist)
    [problem] = problems(dist)
    assert problem.startswith(f"{core.name}: attestation {core.name}.publish.attestation: its subject's sha256 ")
    assert "differs from the file's" in problem and "names" not in problem


def test_a_renamed_file_leaves_its_attestation_orphaned(tmp_path: Path) -> None:
    dist = release(tmp_path)
    core = files(dist)[0]
    attest.path_for(core).write_text(attestation_json(core.name, "0" * 64))
    attest.path_for(core).rename(dist / "splitfam_core-0.1.0-py3-none-any.whl.publish.attestation")
    [problem] = problems(dist)
    assert problem == ("splitfam_core-0.1.0-py3-none-any.whl.publish.attestation: an attestation of "
                       f"splitfam_core-0.1.0-py3-none-any.whl, which is not in {dist}; remove it, or restore the "
                       "file it attests")


@pytest.mark.parametrize(("document", "expected"), [
    ("not json", "not a PEP 740 attestation"),
    (json.dumps({"version": 2}), "not a PEP 740 attestation (version:"),
    ("two subjects", "its statement has 2 subjects; an attestation names exactly one file"),
    ("slsa", "its predicate is https://slsa.dev/provenance/v1, not the publish attestation"),
])
def test_malformed_attestations_are_one_line_each(tmp_path: Path, document: str, expected: str) -> None:
    dist = release(tmp_path)
    core = files(dist)[0]
    digest = read(dist).artifacts[0].sha256
    if document == "two subjects":
        document = attestation_json(core.name, digest, subjects=[(core.name, digest), ("other.whl", digest)])
    elif document == "slsa":
        document = attestation_json(core.name, digest, predicate="https://slsa.dev/provenance/v1")
    attest.path_for(core).write_text(document)
    [problem] = problems(dist)
    assert problem.startswith(f"{core.name}: attestation {core.name}.publish.attestation: {expected}"), problem
    assert "\n" not in problem


def test_verify_exits_1_on_a_mismatched_attestation_and_attest_refuses_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = release(tmp_path)
    core, plugin, _ = files(dist)
    attest_with_test_key(core)
    shutil.copyfile(attest.path_for(core), attest.path_for(plugin))
    project = ["--project", str(tmp_path), "--family", str(Path(__file__).parents[1] / "data/splitfam/pyproject.toml")]
    assert main(["release", "verify", str(dist), *project]) == 1
    assert "its subject names" in capsys.readouterr().out
    before = sorted(p.name for p in dist.iterdir())
    assert main(["release", "attest", str(dist), *project]) == 1
    assert "nothing attested: fix the release first" in capsys.readouterr().out
    assert sorted(p.name for p in dist.iterdir()) == before


def test_attest_without_an_oidc_identity_is_exit_3_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(("ACTIONS_ID_TOKEN", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none"))
    dist = release(tmp_path)
    before = sorted(p.name for p in dist.iterdir())
    with pytest.raises(attest.AttestError) as raised:
        attest.sign(dist, [f.name for f in files(dist)])
    assert raised.value.exit_code == 3
    assert str(raised.value).startswith("this job has no ambient OIDC identity for Sigstore; nothing was attested")
    assert sorted(p.name for p in dist.iterdir()) == before
    for file in files(dist):  # files already attested are not signed again: nothing to do, no identity needed
        attest_with_test_key(file)
    assert attest.sign(dist, [f.name for f in files(dist)]) == []


@pytest.mark.parametrize("kind", ["fifo", "endless"])
def test_an_attestation_that_is_a_fifo_or_endless_is_refused_without_waiting(tmp_path: Path, kind: str) -> None:
    """A FIFO is opened without waiting and refused; a file past the size cap is refused unread."""
    dist = release(tmp_path)
    core = files(dist)[0]
    target = attest.path_for(core)
    if kind == "fifo":
        os.mkfifo(target)
    else:
        with target.open("wb") as out:
            out.truncate(attest.MAX_ATTESTATION + 1)  # sparse: big, and nothing to read but zeros
    [problem] = problems(dist)
    assert problem.startswith(f"{core.name}: attestation {core.name}.publish.attestation: ") and "\n" not in problem
    assert ("not a regular file" in problem) if kind == "fifo" else ("larger than" in problem or "bytes" in problem)
