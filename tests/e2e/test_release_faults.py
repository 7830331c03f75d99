"""Publishing under faults, against a real pypiserver: each fault leaves nothing lost and
nothing half-published, and no output carries the upload password.

One splitfam 0.1.0 release is built once (Bazel + python -m build); each test publishes a
copy of it to its own server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from splitfam_support import PypiServer

from jaxrel.family import load_family
from jaxrel.release import manifest, publish

pytestmark = pytest.mark.integration




def jaxrel_publish(repo: Path, dist: Path, server: PypiServer, *options: str,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "publish", str(dist),
                           "--repository-url", server.url, *options], cwd=repo, capture_output=True, text=True,
                          env=env or server.twine_env())
    assert server.password not in done.stdout + done.stderr, "the password leaked into the output"
    return done


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_published_exactly(server: PypiServer, dist: Path) -> None:
    """The index holds each artifact once, byte for byte, and nothing else."""
    artifacts = manifest.read(dist).artifacts
    assert server.files() == sorted(a.file for a in artifacts)
    for artifact in artifacts:
        assert sha256(server.packages / artifact.file) == artifact.sha256


def test_server_stopped_mid_publish_then_rerun_completes(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = built[0]
    for key, value in pypiserver.twine_env().items():
        if key.startswith(("TWINE_", "PYTHON_KEYRING")):
            monkeypatch.setenv(key, value)
    stopped: list[str] = []

    def stop_after_first(artifact: manifest.Artifact) -> None:
        if not stopped:
            stopped.append(artifact.file)
            pypiserver.stop()

    family = load_family(repo / "pyproject.toml")
    repository = publish.resolve_repository(None, pypiserver.url, None)
    _, result = publish.publish(dist, family, repository, on_uploaded=stop_after_first)
    assert result.error is not None and "became unreachable" in result.error and "1 of 5 files uploaded" in result.error
    assert result.exit_code == 3
    assert [o.action for o in result.outcomes] == ["uploaded"] + ["not uploaded"] * 4
    assert pypiserver.files() == stopped == [manifest.read(dist).artifacts[0].file]  # the backend went first

    pypiserver.start()
    rerun = jaxrel_publish(repo, dist, pypiserver, "--json")
    assert rerun.returncode == 0, rerun.stderr
    actions = [f["action"] for f in json.loads(rerun.stdout)["files"]]
    assert actions == ["already on the index"] + ["uploaded"] * 4
    assert_published_exactly(pypiserver, dist)


def test_corrupted_wheel_is_refused_before_any_upload(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer
) -> None:
    frontend = next(dist.glob("splitfam-0.1.0-*.whl"))
    data = bytearray(frontend.read_bytes())
    data[len(data) // 2] ^= 0xFF
    frontend.write_bytes(bytes(data))
    done = jaxrel_publish(built[0], dist, pypiserver)
    assert done.returncode == 1
    assert f"verification failed, nothing uploaded: {frontend.name}: sha256" in done.stdout
    assert pypiserver.files() == []


def test_tampered_wheel_with_matching_manifest_is_refused(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer
) -> None:
    """A member changed inside the wheel, and the manifest re-hashed to match: RECORD still refuses it."""
    core = next(dist.glob("splitfam_core-*.whl"))
    tampered = core.with_suffix(".tmp")
    with zipfile.ZipFile(core) as source, zipfile.ZipFile(tampered, "w") as out:
        for item in source.infolist():
            body = source.read(item)
            if item.filename.endswith("/version.py"):
                body = body.replace(b"_api_version = 1", b"_api_version = 9")
            out.writestr(item, body)
    os.replace(tampered, core)
    listing = json.loads((dist / manifest.NAME).read_text())
    for artifact in listing["artifacts"]:
        if artifact["file"] == core.name:
            artifact["sha256"], artifact["size"] = sha256(core), core.stat().st_size
    (dist / manifest.NAME).write_text(json.dumps(listing))
    done = jaxrel_publish(built[0], dist, pypiserver)
    assert done.returncode == 1
    assert "does not match its RECORD hash" in done.stdout
    assert pypiserver.files() == []


def test_wrong_or_missing_credentials_upload_nothing(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer
) -> None:
    wrong = jaxrel_publish(built[0], dist, pypiserver, env=pypiserver.twine_env(password="not-the-password"))
    assert wrong.returncode == 3, "the index refused: an external failure (exit 3), not a refused release (1)"
    assert "rejected the credentials (HTTP 403)" in wrong.stdout and "not-the-password" not in wrong.stdout
    errors = [line for line in wrong.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "rejected the credentials (HTTP 403)" in errors[0], wrong.stderr
    assert "TWINE_USERNAME" in errors[0] and "not-the-password" not in wrong.stderr
    anonymous = {k: v for k, v in pypiserver.twine_env().items() if k not in ("TWINE_USERNAME", "TWINE_PASSWORD")}
    missing = jaxrel_publish(built[0], dist, pypiserver, env=anonymous)
    assert missing.returncode == 3
    assert "needs credentials" in missing.stdout
    assert [line for line in missing.stderr.splitlines() if "error:" in line][0].startswith(
        "jaxrel release publish: error: ") and "needs credentials (HTTP 401)" in missing.stderr
    assert pypiserver.files() == []


def test_existing_file_with_other_bytes_stops_the_release(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer
) -> None:
    artifacts = manifest.read(dist).artifacts
    frontend_sdist = next(a.file for a in artifacts if a.kind == "sdist" and a.distribution == "splitfam")
    (pypiserver.packages / frontend_sdist).write_bytes(b"an older build of the same version")
    done = jaxrel_publish(built[0], dist, pypiserver)
    assert done.returncode == 1
    assert f"{frontend_sdist} is already on" in done.stdout and "with different bytes" in done.stdout
    assert pypiserver.files() == [frontend_sdist]  # nothing else was uploaded


def test_dry_run_shows_exactly_what_would_upload(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer
) -> None:
    first = manifest.read(dist).artifacts[0]
    shutil.copyfile(dist / first.file, pypiserver.packages / first.file)
    done = jaxrel_publish(built[0], dist, pypiserver, "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [(f["file"], f["action"]) for f in result["files"]] == [(first.file, "already on the index")] + [
        (a.file, "would upload") for a in manifest.read(dist).artifacts[1:]]
    assert pypiserver.files() == [first.file]


def test_frontend_without_its_backend_is_never_published(
    built: tuple[Path, Path], dist: Path, pypiserver: PypiServer
) -> None:
    listing = json.loads((dist / manifest.NAME).read_text())
    for artifact in listing["artifacts"]:
        if artifact["role"] != "frontend":
            (dist / artifact["file"]).unlink()
    listing["artifacts"] = [a for a in listing["artifacts"] if a["role"] == "frontend"]
    (dist / manifest.NAME).write_text(json.dumps(listing))
    done = jaxrel_publish(built[0], dist, pypiserver)
    assert done.returncode == 1
    assert "splitfam 0.1.0 requires splitfam-core<=0.1.0,>=0.1.0, and neither" in done.stdout
    assert pypiserver.files() == []
