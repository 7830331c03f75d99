"""pip's configuration, translated for uv."""

from __future__ import annotations

from jaxrel.distributions.pipconfig import parse_config_list

LISTING = """\
global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'
global.find-links='/opt/wheels'
global.index-url='https://files.example/simple'
install.index-url='https://install.example/simple'
:env:.find-links='/env/wheels /env/more'
:env:.cert='/etc/ssl/certs/ca.crt'
unrelated line
"""


def test_environment_beats_files_and_install_beats_global():
    config = parse_config_list(LISTING)
    assert config.index_url == "https://install.example/simple"
    assert config.extra_index_urls == ("file:///srv/a/simple", "file:///srv/b/simple")
    assert config.find_links == ("/env/wheels", "/env/more")
    assert not config.no_index


def test_uv_environment_carries_every_source_and_never_downloads_python():
    env = parse_config_list(LISTING).uv_environment()
    assert env["UV_INDEX_URL"] == "https://install.example/simple"
    assert env["UV_EXTRA_INDEX_URL"] == "file:///srv/a/simple file:///srv/b/simple"
    assert env["UV_FIND_LINKS"] == "/env/wheels,/env/more"
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match" and env["UV_PYTHON_DOWNLOADS"] == "never"


def test_defaults_leave_uv_on_its_own_default_index():
    env = parse_config_list("").uv_environment()
    assert "UV_INDEX_URL" not in env and "UV_EXTRA_INDEX_URL" not in env
