"""The splitfam sample repository and a real pypiserver, for the end-to-end release tests.

A module of its own (not conftest.py) so tests import it unambiguously: ``tests/integration``
has a conftest.py too, and ``from conftest import ...`` would take whichever was imported first.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

from jaxrel.distributions.bazel import LOCAL_BAZELISK, BuildError, find_launcher

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "tests" / "data" / "splitfam"

# What a build leaves in the sample repository; none of it is ever committed.
GITIGNORE = """\
# Bazel's convenience symlinks and machine-local settings
/bazel-*
/user.bazelrc
# the build tools (a symlink to jaxrel's build/tools) and Python build outputs
build/
dist/
*.egg-info/
__pycache__/
"""
# Bazel servers of test workspaces exit on their own after this long idle, should a test
# process die before its teardown shuts them down.
BAZEL_MAX_IDLE_SECONDS = 900


def bazel_shutdown(workspace: Path) -> None:
    """Stop the Bazel server of ``workspace`` (a no-op, starting nothing, when none runs)."""
    try:
        launcher = find_launcher(workspace)
    except BuildError:
        return
    subprocess.run([*launcher, "shutdown"], cwd=workspace, capture_output=True, timeout=120)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)


def make_splitfam(tmp_path_factory: pytest.TempPathFactory, name: str = "splitfam") -> Path:
    """A new git repository holding splitfam 0.1.0, one commit on ``main``.

    The repository is the template plus ``bazel/`` (jaxrel's rules) and
    ``frontend/splitfam/_guard.py`` (``jaxrel/guard.py``), a ``.gitignore``, and two
    ignored, uncommitted conveniences: ``user.bazelrc`` (read by the template's
    ``.bazelrc``) putting Bazel's output base in a temporary directory beside the
    repository, and ``build/tools`` linked to jaxrel's own build tools (bazelisk) when
    they are installed. Callers shut its Bazel server down (:func:`bazel_shutdown`).
    """
    repo = tmp_path_factory.mktemp(name)
    output_base = tmp_path_factory.mktemp(f"{name}-bazel")
    shutil.copytree(TEMPLATE, repo, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "bazel-*", "build", "dist", "*.egg-info",
                                                  "user.bazelrc"))
    shutil.copytree(REPO / "bazel", repo / "bazel", ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    shutil.copyfile(REPO / "jaxrel" / "guard.py", repo / "frontend" / "splitfam" / "_guard.py")
    (repo / ".gitignore").write_text(GITIGNORE)
    (repo / "user.bazelrc").write_text(
        f"startup --output_base={output_base}\nstartup --max_idle_secs={BAZEL_MAX_IDLE_SECONDS}\n"
    )
    tools = REPO / LOCAL_BAZELISK.parents[2]  # build/tools
    if os.access(REPO / LOCAL_BAZELISK, os.X_OK):
        (repo / "build").mkdir()
        (repo / "build" / "tools").symlink_to(tools, target_is_directory=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "splitfam releaser")
    _git(repo, "config", "user.email", "releaser@splitfam.invalid")
    _git(repo, "config", "commit.gpgsign", "false")
    _git(repo, "config", "tag.gpgsign", "false")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "splitfam 0.1.0")
    return repo


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PypiServer:
    """A pypiserver process on ``127.0.0.1:port`` serving (and storing uploads in) ``packages``.

    Uploads need ``username``/``password`` (``-a update``); listing and downloads do not.
    Nothing falls back to another index (``--disable-fallback``). Links carry ``#sha256=``.
    """

    def __init__(self, root: Path, username: str = "releaser", password: str | None = None,
                 port: int | None = None) -> None:
        import secrets

        from passlib.apache import HtpasswdFile

        self.root = root
        self.packages = root / "packages"
        self.packages.mkdir(parents=True, exist_ok=True)
        self.htpasswd = root / "htpasswd"
        self.log = root / "pypiserver.log"
        self.username = username
        self.password = password if password is not None else secrets.token_urlsafe(16)
        users = HtpasswdFile(str(self.htpasswd), new=True)
        users.set_password(self.username, self.password)
        users.save()
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The upload URL (``twine upload --repository-url``)."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def simple_url(self) -> str:
        """The PEP 503 simple index (``pip install --index-url``)."""
        return f"{self.url}simple/"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(self.port),
                "-P", str(self.htpasswd), "-a", "update", "--disable-fallback", "--hash-algo", "sha256",
                str(self.packages)]

    def start(self, timeout: float = 20.0) -> PypiServer:
        """Start the server (same port, same packages) and wait until its simple index answers."""
        if self.running:
            return self
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + timeout
        problem = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                problem = f"exited with status {self.process.returncode}"
                break
            try:
                with opener.open(self.simple_url, timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError) as error:
                problem = str(error)
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pypiserver on port {self.port} did not come up within {timeout:g}s ({problem}); "
                           f"its output:\n{self.output()}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and wait for it; the packages stay."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def files(self) -> list[str]:
        """The file names stored in the index, sorted."""
        return sorted(p.name for p in self.packages.iterdir() if p.is_file() and not p.name.startswith("."))

    def output(self) -> str:
        """What the server has logged (all starts)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def twine_env(self, password: str | None = None) -> dict[str, str]:
        """``os.environ`` plus twine's credentials for this server (and no keyring lookups)."""
        return {
            **os.environ,
            "TWINE_USERNAME": self.username,
            "TWINE_PASSWORD": self.password if password is None else password,
            "TWINE_NON_INTERACTIVE": "1",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        }

    def __repr__(self) -> str:
        return f"PypiServer({self.url!r}, packages={str(self.packages)!r}, running={self.running})"


# -- compat: installable releases of splitfam's core and plugin, and a frontend at another version ---------


def python_files(root: Path, package: str) -> dict[str, bytes]:
    """The ``.py`` files of ``root/package``, as a wheel holds them (``package/...``)."""
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted((root / package).rglob("*.py")) if "__pycache__" not in path.parts}


def core_release(repo: Path, version: str, api: int, wheelhouse: Path, extra: str = "") -> Path:
    """A ``splitfam-core`` wheel at ``version`` exporting API number ``api``, into ``wheelhouse``.

    The template's Python files, with the compiled ``_core`` replaced by a Python module of the
    same API (plus ``extra``, code defining new functions, re-exported): the compat runner needs
    installable core releases, not a C compiler; the release tests build the real one with Bazel.
    """
    from jaxrel.distributions.wheels import write_wheel

    files = python_files(repo / "core", "splitfam_core")
    files["splitfam_core/version.py"] = (f'_version = "{version}"\n_api_version = {api}\n'
                                         "__version__ = _version\n").encode()
    names = ["add", *(line.split("(")[0].removeprefix("def ").strip() for line in extra.splitlines()
                      if line.startswith("def "))]
    files["splitfam_core/_core.py"] = ("def add(a, b):\n    return a + b\n" + extra).encode()
    files["splitfam_core/__init__.py"] = (f"from splitfam_core._core import {', '.join(names)}\n"
                                          "from splitfam_core.version import __version__, _api_version\n").encode()
    return _into(write_wheel(wheelhouse.parent / f"build-core-{version}", "splitfam-core", version, files), wheelhouse)


def plugin_release(repo: Path, version: str, wheelhouse: Path, requires: Sequence[str] = ()) -> Path:
    """A ``splitfam-cpu-plugin`` wheel at ``version`` (the template's pure-Python plugin), into ``wheelhouse``;
    ``requires``: its ``Requires-Dist`` lines (an extra of its own, as ``jax-cuda13-plugin[with-cuda]``)."""
    from jaxrel.distributions.wheels import write_wheel

    files = python_files(repo / "plugin", "splitfam_cpu_plugin")
    files["splitfam_cpu_plugin/version.py"] = f'_version = "{version}"\n__version__ = _version\n'.encode()
    built = write_wheel(wheelhouse.parent / f"build-plugin-{version}", "splitfam-cpu-plugin", version, files, requires)
    return _into(built, wheelhouse)


def _into(wheel: Path, wheelhouse: Path) -> Path:
    wheelhouse.mkdir(parents=True, exist_ok=True)
    target = wheelhouse / wheel.name
    shutil.move(wheel, target)
    shutil.rmtree(wheel.parent)
    return target


def set_frontend_version(repo: Path, version: str, minimum: str) -> None:
    """The frontend at ``version``, supporting cores from ``minimum`` to ``version`` (uncommitted edits)."""
    version_file = repo / "frontend" / "splitfam" / "version.py"
    version_file.write_text(f'"""splitfam\'s version and the oldest splitfam-core it supports."""\n\n'
                            f'_version = "{version}"\n_minimum_core_version = "{minimum}"\n\n'
                            "__version__ = _version\n")
    pyproject = repo / "frontend" / "pyproject.toml"
    text = pyproject.read_text()
    assert text.count('"0.1.0"') == 1 and "splitfam-core>=0.1.0,<=0.1.0" in text
    pyproject.write_text(text.replace('version = "0.1.0"', f'version = "{version}"')
                         .replace("splitfam-core>=0.1.0,<=0.1.0", f"splitfam-core>={minimum},<={version}"))
