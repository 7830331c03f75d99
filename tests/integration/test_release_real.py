"""``jaxrel release check`` on the real sdist of the newest jax release, with the built-in
``jax`` profile: it reports what passes, what fails and what cannot apply to an sdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxrel import policy
from jaxrel.cli import main
from jaxrel.distributions.index import Index

pytestmark = pytest.mark.integration


def test_check_on_the_newest_jax_sdist(index_reachable: None, capsys: pytest.CaptureFixture[str]) -> None:
    index = Index.from_pip()
    listing = index.listing("jax")
    version = [v for v in listing.versions() if policy.is_final(v) and listing.sdist(v)][-1]
    sdist = listing.sdist(version)
    assert sdist is not None
    path = index.download(sdist)
    code = main(["release", "check", "--family", "jax", str(Path(path)), "--json"])
    report = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in report["checks"]}
    status = {name: c["status"] for name, c in checks.items()}
    assert report["plan"]["version"] == str(version)
    assert status["versions:jax"] == "pass" and "PKG-INFO:Version" in checks["versions:jax"]["detail"]
    assert status["frontend-requires-backend-range"] == "pass"  # PKG-INFO: jaxlib>=minimum,<=version
    assert status["rule:minimum-is-released"] == "pass"
    assert any(name.startswith("pin:jax-cuda12-plugin[") and s == "pass" for name, s in status.items())
    for not_in_an_sdist in ("changelog", "git-clean", "tag-free"):
        assert status[not_in_an_sdist] == "n/a", checks[not_in_an_sdist]
    # It is released already, so releasing it again is refused; and extras the index cannot satisfy fail
    # (jax 0.12.0.1[oneapi] pins jax-oneapi-plugin 0.12.0.1, which was never released); nothing else fails:
    failed = [name for name, s in status.items() if s == "fail"]
    assert failed[-1] == "version-unreleased" and not [n for n in failed[:-1] if not n.startswith("extra:")]
    assert "already on the index" in checks["version-unreleased"]["detail"]
    assert code == 1 and report["ok"] is False
