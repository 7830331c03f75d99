"""The release scripts end to end, against a real pypiserver on loopback with authentication.

The splitfam family (a pure frontend, a core wheel built by the project's Bazel rules, a
pinned plugin) is checked, built, verified and published at 0.1.0; bumped to 0.2.0 and
released again; then a fresh environment installs the frontend from that server alone and
its import-time guard accepts it; finally a backend-only release is refused by ``check``.
Every command runs as CI runs it (``python -m jaxrel release ...``) and no output of any of
them may contain the upload password.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from splitfam_support import PypiServer

from jaxrel.distributions.bazel import BuildError, find_launcher

pytestmark = pytest.mark.integration
FILES_PER_RELEASE = 5  # core wheel; plugin sdist + wheel; frontend sdist + wheel


class Releaser:
    """Runs ``jaxrel release`` in one repository, keeping every line of output to check for secrets."""

    def __init__(self, repo: Path, server: PypiServer) -> None:
        self.repo, self.server, self.outputs = repo, server, []

    def run(self, *args: str, password: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "jaxrel", "release", *args], cwd=self.repo, text=True,
                              capture_output=True, env=self.server.twine_env(password), timeout=600)
        self.outputs.append(done.stdout + done.stderr)
        return done

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, f"jaxrel release {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def commit(self, message: str) -> None:
        subprocess.run(["git", "commit", "-qam", message], cwd=self.repo, check=True)

    def release(self, dist: str) -> dict:
        """check → build → verify → publish, as the release workflow runs them."""
        self.ok("check", "--index-url", self.server.simple_url)
        self.ok("build", "--output", dist)
        self.ok("verify", dist)
        return json.loads(self.ok("publish", dist, "--repository-url", self.server.url, "--json"))


@pytest.fixture(autouse=True)
def bazel_available() -> None:
    try:
        find_launcher(Path.cwd())
    except BuildError as error:
        pytest.skip(f"Bazel is not installed: {error}")


@pytest.mark.long("a whole release: built with Bazel, published to a real pypiserver, installed from it, and refused")
def test_release_publish_install_and_refuse_backend_only(
    splitfam: Path, pypiserver: PypiServer, tmp_path: Path
) -> None:
    releaser = Releaser(splitfam, pypiserver)
    plan = json.loads(releaser.ok("plan", "--index-url", pypiserver.simple_url, "--json"))
    assert plan["contents"] == "frontend + backend + plugins"
    assert plan["upload_order"] == ["splitfam-core", "splitfam-cpu-plugin", "splitfam"]

    first = releaser.release(str(tmp_path / "dist-0.1.0"))
    assert [f["action"] for f in first["files"]] == ["uploaded"] * FILES_PER_RELEASE
    assert first["files"][0]["file"].startswith("splitfam_core-0.1.0-cp")  # backend first, frontend last
    assert first["files"][-1]["distribution"] == "splitfam"
    assert len(pypiserver.files()) == FILES_PER_RELEASE

    releaser.ok("bump", "0.2.0")
    changelog = splitfam / "CHANGELOG.md"
    changelog.write_text(changelog.read_text() + "\n## 0.2.0\n\n- The second release.\n")
    releaser.commit("splitfam 0.2.0")
    second = releaser.release(str(tmp_path / "dist-0.2.0"))
    assert [f["action"] for f in second["files"]] == ["uploaded"] * FILES_PER_RELEASE
    assert len(pypiserver.files()) == 2 * FILES_PER_RELEASE
    again = releaser.run("publish", str(tmp_path / "dist-0.2.0"), "--repository-url", pypiserver.url, "--json")
    assert again.returncode == 0  # a rerun of a finished publish uploads nothing
    assert {f["action"] for f in json.loads(again.stdout)["files"]} == {"already on the index"}

    environment = tmp_path / "fresh"
    venv.create(environment, with_pip=True)
    python = str(environment / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "--isolated", "--disable-pip-version-check",
                              "--index-url", pypiserver.simple_url, "splitfam", "splitfam-cpu-plugin"],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    imported = subprocess.run([python, "-c", "import splitfam, splitfam_core; "
                               "print(splitfam.__version__, splitfam_core.__version__, splitfam.add(2, 3))"],
                              capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == ["0.2.0", "0.2.0", "5"]

    releaser.ok("bump", "0.3.0", "--component", "splitfam-core")
    releaser.commit("splitfam-core 0.3.0 alone")
    refused = releaser.run("check", "--index-url", pypiserver.simple_url, "--version", "0.3.0")
    assert refused.returncode == 1
    assert "FAIL  rule:backend-release-has-frontend-release" in refused.stdout
    assert "needs a splitfam release of the same version" in refused.stdout

    everything = "\n".join(releaser.outputs)
    assert pypiserver.password not in everything
    assert pypiserver.password not in "".join(p.read_text(errors="replace") for p in tmp_path.rglob("manifest.json"))
