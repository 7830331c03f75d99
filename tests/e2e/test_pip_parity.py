"""jaxrel's sources are the ones pip itself uses, on the same configuration.

Six loopback indexes each hold ``probe-shared`` at a version of their own (and a find-links page
holds one more); a pip configuration file plus ``PIP_*`` variables choose among them. For each
configuration, pip is asked (``pip install --dry-run --report`` without ``--quiet``: its "Looking in
indexes/links" lines and the version it picks), and so are jaxrel (``pip_index_config``, then its
index client's listing, logged by the server) and uv with the environment jaxrel derives for it
(the pages it asks, the version it picks). All three must agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from simple_index import Behaviour, SimpleIndexServer, make_wheel, self_signed

from jaxrel.distributions import pipconfig
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.distributions.pipconfig import PipConfigError, pip_command, pip_index_config
from jaxrel.errors import BadInput

NAMES = ["a", "b", "c", "d", "team's", "e"]  # "team's": a value pip prints in double quotes
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleIndexServer]:
    root = tmp_path_factory.mktemp("parity")
    with SimpleIndexServer() as served:
        for number, name in enumerate(NAMES, start=1):
            wheel = make_wheel(root / f"w{number}", "probe-shared", f"{number}.0")
            served.add(name, Behaviour(json=number % 2 == 0), probe_shared=[wheel])
        yield served


@pytest.fixture(autouse=True)
def _pip_asked_afresh() -> Iterator[None]:
    """Each test asks pip under its own configuration; none is left cached for the tests after it."""
    pip_index_config.cache_clear()
    yield
    pip_index_config.cache_clear()


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pip.conf"
    path.write_text(text)
    return path


def _environment(config: Path, variables: dict[str, str], home: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))
            and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")}
    return {**base, "HOME": str(home), "PIP_CONFIG_FILE": str(config), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_CACHE_DIR": "1", **variables}


def _pip(env: dict[str, str], tmp_path: Path) -> tuple[list[str], list[str], str | None]:
    """pip's "Looking in indexes/links" and the version of probe-shared it picks."""
    report = tmp_path / "report.json"
    done = subprocess.run([*pip_command(), "install", "--dry-run", "--ignore-installed", "--no-deps", "--report",
                           str(report), "probe-shared"], capture_output=True, text=True, env=env, timeout=120)
    indexes: list[str] = []
    links: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith("Looking in indexes: "):
            indexes = line.removeprefix("Looking in indexes: ").split(", ")
        if line.startswith("Looking in links: "):
            links = line.removeprefix("Looking in links: ").split(", ")
    picked = None
    if done.returncode == 0:
        picked = json.loads(report.read_text())["install"][0]["metadata"]["version"]
    return indexes, links, picked


def _uv(env: dict[str, str], tmp_path: Path, config: pipconfig.PipIndexConfig) -> str | None:
    venv = tmp_path / "venv"
    if not venv.exists():
        subprocess.run([UV, "venv", "--no-config", "--python", sys.executable, str(venv)], env=env, check=True,
                       capture_output=True, timeout=120)
    done = subprocess.run([UV, "pip", "install", "--no-config", "--no-cache", "--dry-run", "--no-deps", "--python",
                           str(venv / "bin" / "python"), "probe-shared"], capture_output=True, text=True,
                          env={**env, **config.uv_environment()}, timeout=120)
    said = done.stdout + done.stderr
    return next((line.split("==")[1].strip() for line in said.splitlines() if "probe-shared==" in line), None)


SCENARIOS = {
    # [install] beats [global]; [download] is another command's; a multi-line extra-index-url
    "files": ("[global]\nindex-url = {a}\nextra-index-url =\n    {b}\n    {c}\n[install]\nindex-url = {team's}\n"
              "[download]\nindex-url = {d}\n", {}, ["team's", "b", "c"]),
    # PIP_INDEX_URL beats both files' sections
    "variable": ("[global]\nindex-url = {a}\nextra-index-url =\n    {b}\n    {c}\n[install]\nindex-url = {team's}\n",
                 {"PIP_INDEX_URL": "{d}"}, ["d", "b", "c"]),
    # a list in [install] replaces [global]'s; an empty variable is ignored
    "replace": ("[global]\nindex-url = {a}\nextra-index-url = {b} {c}\n[install]\nextra-index-url = {e}\n",
                {"PIP_INDEX_URL": ""}, ["a", "e"]),
    # no-index with an http(s) find-links page: only the page
    "no-index": ("[global]\nindex-url = {a}\nno-index = yes\nfind-links = {flat-b}\n", {}, ["flat:b"]),
    # PIP_NO_INDEX=off undoes the file's no-index; PIP_FIND_LINKS replaces the file's find-links
    "no-index-off": ("[global]\nindex-url = {a}\nno-index = true\nfind-links = {flat-b}\n",
                     {"PIP_NO_INDEX": "off", "PIP_FIND_LINKS": "{flat-c}"}, ["a", "flat:c"]),
    # PIP_EXTRA_INDEX_URL as pip's documented space-separated list, beside a file's index
    "extra-variable": ("[install]\nindex-url = {c}\n", {"PIP_EXTRA_INDEX_URL": "{d} {e}"}, ["c", "d", "e"]),
}


def _fill(text: str, server: SimpleIndexServer) -> str:
    for name in NAMES:
        text = text.replace("{" + name + "}", server.url(name)).replace("{flat-" + name + "}", server.flat(name))
    return text


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_jaxrel_pip_and_uv_use_the_same_sources(scenario: str, server: SimpleIndexServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    text, variables, expected = SCENARIOS[scenario]
    config_file = _config(tmp_path, _fill(text, server))
    env = _environment(config_file, {k: _fill(v, server) for k, v in variables.items()}, tmp_path)

    indexes, links, pip_picked = _pip(env, tmp_path)
    server.reset_log()
    monkeypatch.setattr(os, "environ", env)
    config = pip_index_config()
    ours = [*([] if config.no_index else [config.index_url or ""]), *([] if config.no_index
                                                                        else config.extra_index_urls)]
    assert ours == indexes or (not indexes and config.no_index), (ours, indexes)
    assert list(config.find_links) == links

    index = Index.from_pip(cache=tmp_path / "cache", refresh=True)
    listing = index.listing("probe-shared")
    ours_asked = server.asked("simple") | {f"flat:{n}" for n in server.asked("flat")}
    loopback_expected = {name for name in expected}
    assert ours_asked & ({*NAMES} | {f"flat:{n}" for n in NAMES}) == loopback_expected
    newest = str(listing.versions()[-1]) if listing.files else None
    assert newest == pip_picked

    server.reset_log()
    uv_picked = _uv(env, tmp_path, config)
    uv_asked = server.asked("simple") | {f"flat:{n}" for n in server.asked("flat")}
    assert uv_asked == loopback_expected
    assert uv_picked == pip_picked


def test_pips_own_printout_decodes_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Multi-line and quoted values as pip itself prints them (``pip config list``) read back as pip holds them."""
    config_file = _config(tmp_path, "[global]\nextra-index-url =\n    http://127.0.0.1:1/x/simple\n"
                                    "    http://127.0.0.1:1/y=1/simple\n"
                                    "index-url = http://127.0.0.1:1/team's \"q\"/simple/\n"
                                    "cert = ~/ca.pem\n")
    env = _environment(config_file, {}, tmp_path)
    printed = subprocess.run([*pip_command(), "config", "list"], capture_output=True, text=True, env=env,
                             check=True).stdout
    assert "\\n" in printed  # pip escapes the line breaks: one line per key
    decoded = {(s, k): v for s, k, v in pipconfig.decode_config_list(printed) if s == "global"}
    assert decoded[("global", "extra-index-url")].split() == ["http://127.0.0.1:1/x/simple",
                                                             "http://127.0.0.1:1/y=1/simple"]
    assert decoded[("global", "index-url")] == "http://127.0.0.1:1/team's \"q\"/simple/"
    with pytest.raises(BadInput, match="index-url in pip's configuration .* spaces"):
        pipconfig.parse_config_list(printed)  # pip would take it; jaxrel refuses a URL holding a space
    monkeypatch.setenv("HOME", str(tmp_path))
    cert = pipconfig.parse_config_list(printed.replace(' \\"q\\"', "").replace(" \"q\"", "")).cert
    assert cert == str(tmp_path / "ca.pem")  # pip's "path" type expands ~ (HOME is tmp_path)


def test_pip_refusing_its_configuration_is_refused_not_a_fallback(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config_file = _config(tmp_path, "this is not an ini file\nindex-url = http://127.0.0.1:1/private/simple/\n")
    monkeypatch.setattr(os, "environ", _environment(config_file, {}, tmp_path))
    with pytest.raises(PipConfigError, match=r"pip cannot read its own configuration .*pass --index-url"):
        pip_index_config()
    with pytest.raises(PipConfigError):
        Index.from_pip(cache=tmp_path / "cache")


@pytest.mark.parametrize("line", ["global.index-url=http://unquoted/simple", "garbage", "global.index-url='open"])
def test_a_line_pip_did_not_write_is_refused(line: str) -> None:
    with pytest.raises(PipConfigError, match="cannot read"):
        pipconfig.parse_config_list(line + "\n")


def test_a_boolean_pip_would_refuse_is_refused() -> None:
    with pytest.raises(BadInput, match="PIP_NO_INDEX .*not a boolean"):
        pipconfig.parse_config_list(":env:.no-index='maybe'\n")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the loopback certificate; not installed")
@pytest.mark.parametrize("where", ["install", "download", "REQUESTS_CA_BUNDLE"])
def test_the_ca_bundle_is_the_one_pip_uses(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cert`` in ``[install]`` is pip install's bundle; in ``[download]`` it is not; ``REQUESTS_CA_BUNDLE`` beats
    it (pip's HTTP library's rule). Where pip fails TLS, jaxrel fails too."""
    cert, context = self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    wrong, _ = self_signed(tmp_path / "other")
    with SimpleIndexServer(tls=context) as served:
        served.add("tls", probe_shared=[make_wheel(tmp_path / "w", "probe-shared", "7.0")])
        section = "download" if where == "download" else "install"
        config_file = _config(tmp_path, f"[global]\nindex-url = {served.url('tls')}\ncert = {wrong}\n"
                                        f"[{section}]\ncert = {cert}\n")
        env = _environment(config_file, {"REQUESTS_CA_BUNDLE": str(wrong)} if where == "REQUESTS_CA_BUNDLE" else {},
                           tmp_path)
        _, _, pip_picked = _pip(env, tmp_path)
        monkeypatch.setattr(os, "environ", env)
        config = pip_index_config()
        index = Index.from_pip(cache=tmp_path / "cache", refresh=True)
        if where == "install":
            assert pip_picked == "7.0" and config.ca_bundle == str(cert)
            assert [str(v) for v in index.listing("probe-shared").versions()] == ["7.0"]
            assert _uv(env, tmp_path, config) == "7.0"
        else:
            assert pip_picked is None and config.ca_bundle == str(wrong)
            with pytest.raises(IndexClientError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
                index.listing("probe-shared")


def _local_index(root: Path, wheels: list[Path], name: str = "probe-shared") -> str:
    """A PEP 503 index on disk (``root/simple/<name>/index.html``) listing ``wheels``; its file:// URL."""
    import hashlib

    project = root / "simple" / name
    project.mkdir(parents=True, exist_ok=True)
    links = "".join(f'<a href="{w.as_uri()}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
                    for w in wheels)
    (project / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return (root / "simple").as_uri()


def test_local_indexes_as_pip_and_uv_read_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``file://`` index whose folder is missing is ignored with a warning (pip: "Location … is ignored"; uv
    says nothing) while the others answer; a wheel added to a local index is seen at once by all three (no listing
    kept an hour for a local file)."""
    one = make_wheel(tmp_path / "w1", "probe-shared", "1.0")
    two = make_wheel(tmp_path / "w2", "probe-shared", "2.0")
    missing = (tmp_path / "absent" / "simple").as_uri()
    present = _local_index(tmp_path / "local", [one])
    config_file = _config(tmp_path, f"[global]\nindex-url = {missing}\nextra-index-url = {present}\n")
    env = _environment(config_file, {}, tmp_path)
    monkeypatch.setattr(os, "environ", env)
    said: list[str] = []
    config = pip_index_config()
    for wheels, expected in (([one], "1.0"), ([one, two], "2.0")):
        _local_index(tmp_path / "local", wheels)
        assert _pip(env, tmp_path)[2] == expected
        listing = Index.from_pip(cache=tmp_path / "cache", progress=said.append).listing("probe-shared")
        assert str(listing.versions()[-1]) == expected
        assert _uv(env, tmp_path, config) == expected
    assert said == [f"warning: index {missing} is ignored: {tmp_path / 'absent' / 'simple'} is not a directory "
                    "(pip ignores it too); fix pip's index configuration (pip config list)"] * 2


def test_one_file_name_with_two_hashes_is_refused_where_pip_picks_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two indexes list ``probe-shared-1.0-py3-none-any.whl`` with different bytes: pip installs one of them without
    a word (measured with pip 23.2: the extra index's); jaxrel refuses, naming both sources, since which build a
    user gets would hang on index order (docs/pip.md, where jaxrel differs on purpose)."""
    first = make_wheel(tmp_path / "w1", "probe-shared", "1.0")
    second = make_wheel(tmp_path / "w2", "probe-shared", "1.0", padding=64)
    assert first.name == second.name and first.read_bytes() != second.read_bytes()
    one, two = _local_index(tmp_path / "one", [first]), _local_index(tmp_path / "two", [second])
    env = _environment(_config(tmp_path, f"[global]\nindex-url = {one}\nextra-index-url = {two}\n"), {}, tmp_path)
    report = tmp_path / "report.json"
    done = subprocess.run([*pip_command(), "install", "--dry-run", "--ignore-installed", "--no-deps", "--report",
                           str(report), "probe-shared"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    picked = json.loads(report.read_text())["install"][0]["download_info"]["url"]
    assert picked in (first.as_uri(), second.as_uri())
    monkeypatch.setattr(os, "environ", env)
    with pytest.raises(IndexClientError, match=rf"{first.name}: {one} and {two} list different sha256 hashes; "
                                               "one of them serves another build: pass --index-url"):
        Index.from_pip(cache=tmp_path / "cache").listing("probe-shared")


def test_a_missing_find_links_folder_as_pip_and_uv_read_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip ignores a configured find-links folder that does not exist ("Location … is ignored"); uv stops on one
    ("Failed to read `--find-links` directory"), so the environment jaxrel derives for uv leaves it out and uv
    installs what pip installs."""
    one = make_wheel(tmp_path / "w1", "probe-shared", "1.0")
    present = _local_index(tmp_path / "local", [one])
    absent = tmp_path / "absent-wheels"
    env = _environment(_config(tmp_path, f"[global]\nindex-url = {present}\nfind-links = {absent}\n"), {}, tmp_path)
    assert _pip(env, tmp_path)[2] == "1.0"
    monkeypatch.setattr(os, "environ", env)
    said: list[str] = []
    config = pip_index_config()
    index = Index.from_pip(cache=tmp_path / "cache", progress=said.append)
    assert str(index.listing("probe-shared").versions()[-1]) == "1.0"
    assert said == [f"warning: find-links {absent} is ignored: not a directory (pip ignores it too); fix pip's "
                    "index configuration (pip config list)"]
    assert config.find_links == (str(absent),) and "UV_FIND_LINKS" not in config.uv_environment()
    assert _uv(env, tmp_path, config) == "1.0"
    assert _uv(env, tmp_path, index.pip_config()) == "1.0"
    handed = {**config.uv_environment(), "UV_FIND_LINKS": str(absent)}  # as uv got it before: it stops
    done = subprocess.run([UV, "pip", "install", "--no-config", "--no-cache", "--dry-run", "--no-deps", "--python",
                           str(tmp_path / "venv" / "bin" / "python"), "probe-shared"], capture_output=True,
                          text=True, env={**env, **handed}, timeout=120)
    assert done.returncode != 0 and "find-links" in done.stderr
