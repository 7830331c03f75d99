"""The ``pypiserver`` fixture is a real index: twine uploads with the right credentials only,
once per file name; the simple index links carry ``#sha256=``; a restart keeps the packages."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest


def tiny_wheel(directory: Path, name: str = "tiny-pkg", version: str = "1.0") -> Path:
    """A minimal valid pure-Python wheel."""
    stem = f"{name.replace('-', '_')}-{version}"
    members = {
        f"{name.replace('-', '_')}/__init__.py": b"",
        f"{stem}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{stem}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in members.items()
    ) + f"{stem}.dist-info/RECORD,,\n"
    members[f"{stem}.dist-info/RECORD"] = record.encode()
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in members.items():
            archive.writestr(path, data)
    return wheel


def twine_upload(server, wheel: Path, password: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "twine", "upload", "--non-interactive", "--disable-progress-bar",
         "--repository-url", server.url, str(wheel)],
        capture_output=True, text=True, env=server.twine_env(password), timeout=120,
    )


def fetch(url: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return response.read().decode()


def test_upload_needs_the_password_and_a_new_file_name(pypiserver, tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path)

    wrong = twine_upload(pypiserver, wheel, password="not-" + pypiserver.password)
    assert wrong.returncode == 1
    assert "403 Forbidden" in wrong.stdout + wrong.stderr
    assert pypiserver.files() == []

    uploaded = twine_upload(pypiserver, wheel)
    assert uploaded.returncode == 0, uploaded.stdout + uploaded.stderr
    assert pypiserver.files() == [wheel.name]

    again = twine_upload(pypiserver, wheel)
    assert again.returncode == 1
    assert "400 Bad Request" in again.stdout + again.stderr  # twine shows no reason without --verbose
    assert f"Cannot upload {wheel.name!r} since it already exists!" in pypiserver.output()
    assert pypiserver.files() == [wheel.name]


def test_simple_index_links_carry_sha256(pypiserver, tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path)
    assert twine_upload(pypiserver, wheel).returncode == 0
    page = fetch(pypiserver.simple_url + "tiny-pkg/")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert re.search(rf'href="[^"]*/{re.escape(wheel.name)}#sha256={digest}"', page), page
    assert "tiny-pkg" in fetch(pypiserver.simple_url)


def test_restart_keeps_port_and_packages(pypiserver, tmp_path: Path) -> None:
    assert twine_upload(pypiserver, tiny_wheel(tmp_path)).returncode == 0
    url = pypiserver.url
    pypiserver.stop()
    assert not pypiserver.running
    with pytest.raises(OSError):
        fetch(pypiserver.simple_url)
    pypiserver.start()
    assert pypiserver.url == url
    assert "tiny_pkg-1.0-py3-none-any.whl" in fetch(pypiserver.simple_url + "tiny-pkg/")
    assert twine_upload(pypiserver, tiny_wheel(tmp_path / "2", version="1.1")).returncode == 0
    assert pypiserver.files() == ["tiny_pkg-1.0-py3-none-any.whl", "tiny_pkg-1.1-py3-none-any.whl"]


def test_servers_are_independent(pypiserver_factory) -> None:
    first, second = pypiserver_factory("one"), pypiserver_factory("two")
    assert first.port != second.port and first.packages != second.packages
    assert first.password != second.password
