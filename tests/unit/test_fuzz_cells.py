"""Generative fuzz of the newer verbs' inputs: bisect and atlas options, ``--good-report`` JSON, a CI token
endpoint and index that echo secrets, attestations, and interpreters that answer anything.

The property for every example: the exit code is 0, 1, 2, 3 or 130 (never 70), an error is one line on
stderr without a traceback, no secret of the run appears in anything printed, nothing outside the declared
outputs changes, and no child process is left behind. CI runs a bounded count; ``nox -s fuzz`` runs the
``fuzz`` profile.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzzing import (
    HUGE_VERSION,
    ODD_STRINGS,
    SCALARS_JSON,
    assert_handled,
    digests,
    fuzz_settings,
    json_texts,
    mutated,
    run_cli,
)
from hypothesis import example, given
from hypothesis import strategies as st
from test_hostile_cli import _frontend_repository
from test_release_auth import GOOD, Loopback, reply

from jaxrel.release import attest, auth

DEAD_INDEX = "http://127.0.0.1:9/simple/"
VERSIONISH = st.one_of(st.sampled_from(ODD_STRINGS), HUGE_VERSION, st.text(max_size=30),
                       st.from_regex(r"[0-9]{1,6}(\.[0-9]{1,6}){0,4}(rc[0-9]|\.dev[0-9]+|\+[a-z0-9.]+)?",
                                     fullmatch=True))
REVISION = st.one_of(st.sampled_from(["good", "bad", "HEAD", "-x", "--output=/tmp/x", "a..b", "HEAD\x00"]),
                     st.text(max_size=40))
TEST_PATH = st.one_of(st.sampled_from(["tests", "tests/test_a.py::test_a", "/etc/passwd", "../x", "jax/x",
                                       "tests/../../etc", ""]), st.text(max_size=30))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz-cells") / "repo"
    _frontend_repository(path)
    return path


def _children() -> set[int]:
    """This process's living children, from /proc (none may be left behind by a run)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


@fuzz_settings(20, 600)
@given(cell=st.one_of(st.builds(lambda v: f"py3.12-jaxlib{v}", VERSIONISH), st.text(max_size=40)),
       good=REVISION, bad=REVISION, tests=st.lists(TEST_PATH, min_size=1, max_size=3),
       python=st.one_of(st.sampled_from(["3.12", "3.x", "3", "3." + "1" * 5000]), st.text(max_size=8)))
def test_fuzzed_bisect_options(repo: Path, tmp_path_factory: pytest.TempPathFactory,
                               capsys: pytest.CaptureFixture[str], cell: str, good: str, bad: str,
                               tests: list[str], python: str) -> None:
    workdir = tmp_path_factory.mktemp("bisect-work")
    before = digests(repo)
    selection = [t for t in tests if not t.startswith("-")] or ["tests"]
    for argv in (["bisect", "--frontend-src", str(repo), f"--good={good}", f"--bad={bad}", f"--cell={cell}",
                  "--frontend-tests", *selection,
                  "--workdir", str(workdir / "w"), "--index-url", DEAD_INDEX],
                 ["bisect", "--frontend-src", str(repo), "--good", "good", "--bad", "bad",
                  f"--backend=jaxlib=={cell.removeprefix('py3.12-jaxlib')}", f"--python={python}",
                  "--workdir", str(workdir / "w"), "--index-url", DEAD_INDEX]):
        code, _, err = run_cli(capsys, argv)
        assert_handled(argv, code, err)
        assert code in (1, 2, 3), (argv, code, err)  # no valid cell builds here: refused before or at the index
    assert digests(repo) == before, "the frontend checkout changed"


@fuzz_settings(20, 1000)
@given(frontends=VERSIONISH, python=st.one_of(st.sampled_from(["3.12", "3.x"]), st.text(max_size=8)),
       backends=VERSIONISH)
def test_fuzzed_atlas_and_matrix_options(tmp_path_factory: pytest.TempPathFactory,
                                         capsys: pytest.CaptureFixture[str], frontends: str, python: str,
                                         backends: str) -> None:
    workdir = tmp_path_factory.mktemp("atlas-work") / "w"
    for argv in (["atlas", f"--frontends={frontends}", f"--python={python}", "--workdir", str(workdir),
                  "--index-url", DEAD_INDEX],
                 ["matrix", f"--backends={backends}", "--workdir", str(workdir), "--index-url", DEAD_INDEX]):
        code, _, err = run_cli(capsys, argv)
        assert_handled(argv, code, err)
    assert not workdir.exists(), "a run that failed before writing anything leaves no work directory"


GREEN = {"ok": True, "frontend": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False}}


@fuzz_settings(30, 1000)
@given(text=json_texts(mutated(GREEN, SCALARS_JSON)))
def test_fuzzed_good_reports(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: bytes) -> None:
    report = tmp_path / "report.json"
    report.write_bytes(text)
    argv = ["bisect", "--frontend-src", str(repo), "--good-report", str(report), "--bad", "bad",
            "--cell", "py3.12-jaxlib0.11.0", "--frontend-tests", "tests", "--workdir", str(tmp_path / "w"),
            "--index-url", DEAD_INDEX]
    code, _, err = run_cli(capsys, argv)
    assert_handled(argv, code, err)


@pytest.fixture(scope="module")
def exchange() -> Iterator[tuple[Loopback, dict[str, Any]]]:
    """A loopback CI endpoint and index whose routes each example sets."""
    routes: dict[str, Any] = {}
    server = Loopback(routes)
    yield server, routes
    server.httpd.shutdown()
    server.httpd.server_close()


SECRET_CHARS = st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Cc", "Zs"])


def _exchange(server: Loopback, served: dict[str, Any], where: str, request_token: str, oidc: str,
              cut: int) -> dict[str, str] | str:
    """The trusted-publishing exchange against routes that echo the tokens as ``where`` says: the minted
    environment, or the one-line error."""
    echo = f"prefix {request_token} {oidc} suffix"[:cut + 20]
    routes = {"ci-raw": {"/ci/token": reply(500, echo.encode("utf-8", "surrogatepass"))},
              "ci-list": {"/ci/token": reply(200, json.dumps([request_token, oidc]).encode())},
              "ci-json": {"/ci/token": reply(200, {"value": oidc, "note": request_token})},
              "mint-422": {"/ci/token": reply(200, {"value": oidc}), "/_/oidc/mint-token": reply(
                  422, {"errors": [{"code": request_token, "description": echo}]})},
              "mint-raw": {"/ci/token": reply(200, {"value": oidc}),
                           "/_/oidc/mint-token": reply(400, echo.encode("utf-8", "surrogatepass"))},
              "mint-ok": {"/ci/token": reply(200, {"value": oidc}), "/_/oidc/mint-token": reply(200, {"token": oidc})},
              }[where]
    served.clear()
    served.update({**GOOD, **routes})
    # one server for every example: its routes change, its socket stays
    environ = {**server.environ(), auth.OIDC_TOKEN_ENV: request_token}
    credentials = auth.Credentials(auth.Auth(auth.Method.TRUSTED_PUBLISHING), f"{server.url}/", environ)
    try:
        return credentials.env()
    except auth.AuthError as error:
        return str(error)


def _neutral(token: str, *avoid: str) -> str:
    """A stand-in of ``token``'s length made of one letter that none of ``avoid`` contains."""
    letter = next(c for c in "QXJKZVWqxjkzvw0123456789" if all(c not in text for text in avoid))
    return letter * len(token)


@fuzz_settings(15, 600)
@given(request_token=st.text(SECRET_CHARS, min_size=8, max_size=40), oidc=st.text(SECRET_CHARS, min_size=8,
       max_size=60), where=st.sampled_from(["ci-raw", "ci-list", "ci-json", "mint-422", "mint-raw", "mint-ok"]),
       cut=st.integers(0, 80))
@example(request_token="othing w", oidc="an-oidc-token", where="ci-raw", cut=0)  # spells "nothing was uploaded"
def test_fuzzed_exchange_never_shows_a_token(exchange: tuple[Loopback, dict[str, Any]], request_token: str,
                                             oidc: str, where: str, cut: int) -> None:
    """A CI endpoint and an index that echo the tokens, whole or cut, however they are spelled: the message is
    one line without them (or the exchange succeeds). A token that happens to spell part of jaxrel's own wording
    ("othing w" in "nothing was uploaded") is no leak: the same exchange with stand-in tokens says it too."""
    server, served = exchange
    outcome = _exchange(server, served, where, request_token, oidc, cut)
    if isinstance(outcome, str):
        message = outcome
        assert "\n" not in message and "\r" not in message
        for secret in {request_token, oidc}:
            if len(secret.strip()) >= 8 and (secret in message or repr(secret)[1:-1] in message):
                stand_ins = (_neutral(request_token, request_token, oidc), _neutral(oidc, request_token, oidc))
                reference = _exchange(server, served, where, *stand_ins, cut)
                assert isinstance(reference, str) and (secret in reference or repr(secret)[1:-1] in reference), \
                    (secret, message)
    else:  # the answers were well formed: the exchange went through, with the index's minted token
        minted = outcome
        assert where in ("ci-json", "mint-ok")
        assert minted["TWINE_PASSWORD"] == (oidc if where == "mint-ok" else "minted-upload-token")


@fuzz_settings(40)
@given(body=st.one_of(st.binary(max_size=300), json_texts(SCALARS_JSON)))
def test_fuzzed_attestations(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "x.whl.publish.attestation"
    path.write_bytes(body)
    try:
        attest.read_subject(path)
    except ValueError as error:
        assert "\n" not in str(error)


@fuzz_settings(12, 400)
@given(answer=st.one_of(st.binary(max_size=200), st.sampled_from([b"[" * 5000, b'["a", "3.12.1", []]',
                                                                  b'["a", "3.12.1", ["\\u0000"]]'])),
       code=st.integers(0, 3))
def test_fuzzed_interpreters(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                             answer: bytes, code: int) -> None:
    """``doctor --python`` on a program that answers anything: handled, and nothing of it left running."""
    folder = tmp_path_factory.mktemp("interpreter")
    (folder / "answer").write_bytes(answer)
    fake = folder / "python"
    fake.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(open({str(folder / 'answer')!r}, "
                    f"'rb').read())\nsys.exit({code})\n")
    fake.chmod(0o755)
    before = _children()
    argv = ["doctor", "--python", str(fake)]
    exit_code, _, err = run_cli(capsys, argv)
    assert_handled(argv, exit_code, err)
    assert _children() <= before, "a child outlived the run"
