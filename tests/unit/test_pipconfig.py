"""pip's configuration, translated for uv."""

from __future__ import annotations

from pathlib import Path

from jaxrel.distributions.pipconfig import parse_config_list

LISTING = """\
global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'
global.find-links='/opt/wheels'
global.index-url='https://files.example/simple'
install.index-url='https://install.example/simple'
:env:.find-links='/env/wheels /env/more'
:env:.cert='/etc/ssl/certs/ca.crt'
download.index-url='https://download.example/simple'
"""


def test_environment_beats_files_and_install_beats_global():
    config = parse_config_list(LISTING)
    assert config.index_url == "https://install.example/simple"  # [download] is pip download's, not pip install's
    assert parse_config_list(LISTING, "download").index_url == "https://download.example/simple"
    assert config.extra_index_urls == ("file:///srv/a/simple", "file:///srv/b/simple")
    assert config.find_links == ("/env/wheels", "/env/more")
    assert not config.no_index


def test_uv_environment_carries_every_source_and_never_downloads_python(tmp_path: Path):
    for folder in ("wheels", "more"):
        (tmp_path / folder).mkdir()
    env = parse_config_list(LISTING.replace("/env/", f"{tmp_path}/")).uv_environment()
    assert env["UV_INDEX_URL"] == "https://install.example/simple"
    assert env["UV_EXTRA_INDEX_URL"] == "file:///srv/a/simple file:///srv/b/simple"
    assert env["UV_FIND_LINKS"] == f"{tmp_path}/wheels,{tmp_path}/more"
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match" and env["UV_PYTHON_DOWNLOADS"] == "never"


def test_a_missing_local_find_links_is_not_handed_to_uv(tmp_path: Path):
    """pip ignores a find-links path that does not exist ("Location … is ignored"); uv stops on it ("Failed to read
    `--find-links` directory"), so uv gets only those pip reads (tests/e2e/test_pip_parity.py asks both)."""
    (tmp_path / "here").mkdir()
    links = f"{tmp_path}/here {tmp_path}/absent {(tmp_path / 'gone').as_uri()} https://links.example/wheels/"
    config = parse_config_list(f"global.find-links='{links}'\n")
    assert config.present_find_links() == [f"{tmp_path}/here", "https://links.example/wheels/"]
    assert config.uv_environment()["UV_FIND_LINKS"] == f"{tmp_path}/here,https://links.example/wheels/"
    assert "UV_FIND_LINKS" not in parse_config_list(f"global.find-links='{tmp_path}/absent'\n").uv_environment()


def test_defaults_leave_uv_on_its_own_default_index():
    env = parse_config_list("").uv_environment()
    assert "UV_INDEX_URL" not in env and "UV_EXTRA_INDEX_URL" not in env


def test_no_index_hands_uv_no_index_at_all():
    env = parse_config_list(LISTING + "global.no-index='yes'\n").uv_environment()
    assert env["UV_NO_INDEX"] == "1" and "UV_INDEX_URL" not in env and "UV_EXTRA_INDEX_URL" not in env


def test_an_empty_value_is_ignored_as_pip_ignores_it():
    config = parse_config_list("global.index-url='https://files.example/simple'\n:env:.index-url=''\n")
    assert config.index_url == "https://files.example/simple"
