"""How plugin cells install their plugins (full, light, local), and the index they are given reaching uv."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from jaxrel.cells import plugin_install
from jaxrel.cells.environment import EnvSettings
from jaxrel.cells.matrix import Cell, Outcome, Purpose
from jaxrel.distributions import envs
from jaxrel.distributions.index import Index
from jaxrel.distributions.pipconfig import PipIndexConfig
from jaxrel.distributions.wheels import write_wheel
from jaxrel.errors import BadInput

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PLUGINS = (("jax-cuda13-plugin", "0.11.2"), ("jax-cuda13-pjrt", "0.11.2"))
WITH_CUDA = (("jax-cuda13-plugin", "with-cuda"),)


def cell(**changes) -> Cell:
    fields = {"id": f"py{PY}-jaxlib0.11.2-cuda13", "python": PY, "backend": "0.11.2", "plugins": PLUGINS,
              "purpose": Purpose.PLUGINS, "expected": Outcome.ACCEPTED, "with_extras": WITH_CUDA, **changes}
    return Cell(**fields)


@pytest.fixture
def resolved(monkeypatch):
    """``resolve`` answering as pip would for jax-cuda13-plugin[with-cuda] (its own pins included)."""
    asked = []

    def fake(requirements, python, cache, index, exclude_newer=None):
        asked.append(requirements)
        return [("jax-cuda13-pjrt", "0.11.2"), ("jax-cuda13-plugin", "0.11.2"), ("nvidia-cuda-runtime", "13.5.37"),
                ("nvidia-cudnn-cu13", "9.28.1.4")]

    monkeypatch.setattr(plugin_install, "resolve", fake)
    return asked


@pytest.mark.parametrize("setting, devices, mode, reason", [
    ("auto", frozenset({"cuda"}), "full", "a cuda device is here"),
    ("auto", frozenset(), "light", "no cuda device here"),
    ("full", frozenset(), "full", "--plugin-install full"),
    ("light", frozenset({"cuda"}), "light", "--plugin-install light"),
])
def test_mode_follows_the_device_and_the_option(resolved, tmp_path, setting, devices, mode, reason):
    planned = plugin_install.plan(cell(), EnvSettings(tmp_path, plugin_install=setting, devices=devices))
    assert (planned.mode, planned.reason) == (mode, reason)
    assert planned.requirement == "jax-cuda13-plugin[with-cuda]==0.11.2"
    assert resolved == [["jax-cuda13-plugin[with-cuda]==0.11.2"]], "resolved in every mode: light checks it exists"
    assert planned.resolution == (("nvidia-cuda-runtime", "13.5.37"), ("nvidia-cudnn-cu13", "9.28.1.4")), \
        "the family's own wheels are installed from their verified files, not again"


def test_descriptions_name_the_install_and_the_resolution(resolved, tmp_path):
    light = plugin_install.plan(cell(), EnvSettings(tmp_path, plugin_install="auto")).describe()
    assert light.startswith("light: the plugins only (no cuda device here)")
    assert "resolves to 2 wheels more, not installed (nvidia-cuda-runtime 13.5.37, nvidia-cudnn-cu13 9.28.1.4)" in light
    full = plugin_install.plan(cell(), EnvSettings(tmp_path, plugin_install="full")).describe()
    assert full.startswith("full: jax-cuda13-plugin[with-cuda]==0.11.2 as pip resolves it, 2 wheels verified")


def test_local_negative_and_extra_less_cells_resolve_nothing(resolved, tmp_path):
    settings = EnvSettings(tmp_path, plugin_install="full", devices=frozenset({"cuda"}))
    local = plugin_install.plan(cell(with_extras=(), local=True), settings)
    assert local.mode == "local" and "relying on the system's libraries" in local.describe()
    assert plugin_install.plan(cell(with_extras=()), settings).mode == ""
    assert plugin_install.plan(cell(expected=Outcome.REFUSED), settings).mode == ""
    assert plugin_install.plan(cell(with_extras=()), settings).describe() == ""
    assert resolved == []


def test_parse_pins_reads_compile_output_and_refuses_anything_else():
    text = "# comment\nnvidia-cublas==13.10.0.20\n\nNvidia_CUDNN_cu13==9.28.1.4  # via x\n"
    assert plugin_install.parse_pins(text, "t") == [("nvidia-cublas", "13.10.0.20"), ("nvidia-cudnn-cu13", "9.28.1.4")]
    for bad in ("nvidia-cublas>=13", "nvidia-cublas", "not a requirement !!", "x==1 ; extra == ", "x==1,==2"):
        with pytest.raises(BadInput):
            plugin_install.parse_pins(bad, "t")


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    built = write_wheel(folder.parent / f"build-{name}", name, version, {f"{name}/__init__.py": b""}, requires)
    return Path(shutil.move(built, folder / built.name))


@pytest.mark.skipif(envs.find_uv() is None, reason="uv is not installed (it comes with the test extra)")
def test_resolve_with_uv_from_a_wheelhouse_alone_and_cached(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    _wheel(house, "plug", "0.1", ['dep==1.0; extra == "with-x"'])
    _wheel(house, "dep", "1.0", [])
    index = PipIndexConfig(find_links=(str(house),), no_index=True)
    cache = tmp_path / "resolutions"
    pins = plugin_install.resolve(["plug[with-x]==0.1"], sys.executable, cache, index)
    assert sorted(pins) == [("dep", "1.0"), ("plug", "0.1")]
    for path in house.iterdir():
        path.unlink()
    assert plugin_install.resolve(["plug[with-x]==0.1"], sys.executable, cache, index) == pins, "kept for later cells"
    for kept in cache.iterdir():  # an hour later, resolved again: the wheelhouse is empty now
        os.utime(kept, (kept.stat().st_mtime - plugin_install.KEPT_FOR - 1,) * 2)
    with pytest.raises(envs.EnvError):
        plugin_install.resolve(["plug[with-x]==0.1"], sys.executable, cache, index)
    with pytest.raises(envs.EnvError, match=r"plug\[with-x\]==0.2 cannot be resolved as pip would install it"):
        plugin_install.resolve(["plug[with-x]==0.2"], sys.executable, cache, index)


def test_index_sources_become_pip_configuration_for_uv_and_pip(tmp_path, monkeypatch):
    house = tmp_path / "house"
    house.mkdir()
    index = Index(["http://127.0.0.1:9/simple/", "http://127.0.0.1:9/extra/"], [house])
    config = index.pip_config()
    assert config == PipIndexConfig("http://127.0.0.1:9/simple/", ("http://127.0.0.1:9/extra/",), (str(house),))
    assert config.pip_arguments() == ["--index-url", "http://127.0.0.1:9/simple/", "--extra-index-url",
                                      "http://127.0.0.1:9/extra/", "--find-links", str(house)]
    houses_only = Index([], [house]).pip_config()
    assert houses_only.no_index and houses_only.uv_environment()["UV_NO_INDEX"] == "1"
    assert houses_only.pip_arguments() == ["--no-index", "--find-links", str(house)]
    # a named index replaces uv's own source settings from the caller's environment
    monkeypatch.setenv("UV_EXTRA_INDEX_URL", "http://127.0.0.1:9/stray/")
    monkeypatch.setenv("UV_INDEX", "stray=http://127.0.0.1:9/stray/")
    env = envs.uv_environment(config)
    assert env["UV_INDEX_URL"] == "http://127.0.0.1:9/simple/"
    assert env["UV_EXTRA_INDEX_URL"] == "http://127.0.0.1:9/extra/" and "UV_INDEX" not in env
    assert "PYTHONPATH" not in env
    assert envs.uv_environment()["UV_INDEX"] == os.environ["UV_INDEX"], "without one, the caller's settings stay"


def test_certificate_reaches_uv_and_pip(tmp_path):
    config = Index(["https://127.0.0.1:9/simple/"], [], cafile=str(tmp_path / "ca.pem")).pip_config()
    assert config.uv_environment()["SSL_CERT_FILE"] == str(tmp_path / "ca.pem")
    assert config.pip_arguments()[-2:] == ["--cert", str(tmp_path / "ca.pem")]


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_a_stalling_index_ends_the_resolution_in_one_line(tmp_path, monkeypatch, resolver):
    """An index that accepts the connection and never answers: the resolution ends by jaxrel's deadline (not the
    resolver's own minutes of retries), one line, exit 3's kind."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def hold() -> None:  # accept and never answer, until the test closes the listener
        with contextlib.suppress(OSError):
            for _ in range(16):
                held.append(listener.accept()[0])

    threading.Thread(target=hold, daemon=True).start()
    monkeypatch.setenv("JAXREL_NET_DEADLINE", "6")
    monkeypatch.setenv("JAXREL_NET_TIMEOUT", "3")
    monkeypatch.delenv("UV_HTTP_TIMEOUT", raising=False)
    if resolver == "pip":
        monkeypatch.setattr(envs, "find_uv", lambda: None)
    index = PipIndexConfig(index_url=f"http://127.0.0.1:{listener.getsockname()[1]}/simple/")
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            plugin_install.resolve(["plug[with-x]==0.1"], sys.executable, tmp_path / "resolutions", index)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(120)
    try:
        assert outcome, "still resolving after two minutes: the deadline was not kept"
        (error,) = outcome
        assert isinstance(error, envs.EnvError) and len(str(error).splitlines()) == 1, error
        assert "plug[with-x]==0.1" in str(error)
    finally:
        for connection in held:
            connection.close()
        listener.close()
