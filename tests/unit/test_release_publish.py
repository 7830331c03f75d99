"""Where publish uploads and lists, and that twine never sees a password from ~/.pypirc."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxrel.errors import BadInput
from jaxrel.release import publish

PYPIRC = """[distutils]
index-servers = private

[private]
repository = http://127.0.0.1:9/legacy/
username = releaser
password = from-the-file
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".pypirc").write_text(PYPIRC)
    return tmp_path


def test_repository_url_lists_its_simple_index() -> None:
    repository = publish.resolve_repository(None, "http://127.0.0.1:8080/", None)
    assert (repository.url, repository.index_url) == ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/simple/")
    assert publish.resolve_repository(None, "http://h/", "http://i/simple/").index_url == "http://i/simple/"


def test_named_repository_from_pypirc(home: Path) -> None:
    repository = publish.resolve_repository("private", None, None)
    assert (repository.name, repository.index_url) == ("private", "http://127.0.0.1:9/simple/")
    with pytest.raises(publish.PublishError, match="no repository 'elsewhere' in .*pypirc"):
        publish.resolve_repository("elsewhere", None, None)


@pytest.mark.parametrize(("name", "url"), [(None, None), ("private", "http://h/")])
def test_exactly_one_target(name: str | None, url: str | None) -> None:
    with pytest.raises(publish.PublishError, match="exactly one of"):
        publish.resolve_repository(name, url, None)


def test_twine_gets_the_pypirc_without_passwords(home: Path) -> None:
    with publish.config_without_passwords() as config:
        text = config.read_text()
        assert "repository = http://127.0.0.1:9/legacy/" in text and "username = releaser" in text
        assert "from-the-file" not in text and "password" not in text
    assert not config.exists()


def test_redact_scrubs_the_password_and_url_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(publish.PASSWORD_ENV, "s3cret-token")
    text = "POST http://releaser:s3cret-token@127.0.0.1:1/ failed; token s3cret-token; https://u:p@h/x"
    assert publish.redact(text) == "POST http://releaser:***@127.0.0.1:1/ failed; token ***; https://u:***@h/x"
    monkeypatch.setenv(publish.PASSWORD_ENV, "b")  # a short secret is replaced where it stands alone only
    assert publish.redact("unreachable; password b") == "unreachable; password ***"


def test_a_repository_not_named_right_is_usage_and_an_index_not_reached_is_the_environment(home: Path) -> None:
    with pytest.raises(publish.PublishError) as usage:
        publish.resolve_repository("elsewhere", None, None)
    assert usage.value.exit_code == 2
    with pytest.raises(publish.PublishError) as neither:
        publish.resolve_repository(None, None, None)
    assert neither.value.exit_code == 2
    artifact = publish.Artifact("x-1.0-py3-none-any.whl", "x", "1.0", "frontend", "wheel", "0" * 64, 1)
    dead = publish.resolve_repository(None, "http://127.0.0.1:9/", None)  # the discard port: refused at once
    with pytest.raises(publish.PublishError, match="cannot list x on .*; nothing was uploaded") as unreachable:
        publish.index_hashes(dead, [artifact])
    assert unreachable.value.exit_code == 3


@pytest.mark.parametrize(("value", "says"), [("127.0.0.1:9/legacy/", "no scheme"),
                                             ("http://bad host/legacy/", "spaces"),
                                             ("ftp://h/legacy/", "")])
def test_a_pypirc_repository_that_is_no_url_is_bad_input_naming_the_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, says: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".pypirc").write_text(PYPIRC.replace("http://127.0.0.1:9/legacy/", value))
    with pytest.raises(BadInput, match=r"\.pypirc \[private\] repository: .*" + says) as caught:
        publish.resolve_repository("private", None, None)
    assert caught.value.exit_code == 2
