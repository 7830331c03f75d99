"""Plugin family rules on real index listings and real plugin METADATA (skips when the index is unreachable)."""

from __future__ import annotations

import zipfile

import pytest
from packaging.version import Version

from jaxrel import policy
from jaxrel.compat.extras import plugin_families
from jaxrel.compat.index import Index
from jaxrel.family import jax_profile

FAMILY = jax_profile()


@pytest.fixture(scope="module")
def index(index_reachable) -> Index:
    return Index.from_pip()


def test_rocm_post_releases_are_exempt_and_on_their_jaxlib_line(index):
    versions = index.listing("jax-rocm7-plugin").versions()
    posts = [v for v in versions if v.post is not None]
    assert posts, "the index has no ROCm .postN release"
    for post in posts:
        verdict = policy.verdict(backend=policy.Pin("jaxlib", Version(policy.release_text(post))),
                                 plugins=[policy.Pin("jax-rocm7-plugin", post)],
                                 exempt_plugins=FAMILY.unpinned(["jax-rocm7-plugin"]))
        assert verdict.compatible, post
    # a pinned family is refused at another release number
    refused = policy.verdict(backend=policy.Pin("jaxlib", Version("0.12.0.1")),
                             plugins=[policy.Pin("jax-cuda13-plugin", Version("0.12.0"))],
                             exempt_plugins=FAMILY.unpinned(["jax-cuda13-plugin"]))
    assert [v.rule for v in refused.violations] == [policy.Rule.PLUGIN_MATCHES_BACKEND]


def test_libtpu_of_the_tpu_extra_exists_and_is_exempt(index, tmp_path):
    jax = index.listing("jax")
    wheel = next(f for f in jax.files_for("0.12.0.1") if f.filename.endswith("py3-none-any.whl"))
    with zipfile.ZipFile(index.download(wheel)) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
    requires = [line.split(":", 1)[1].strip() for line in metadata.decode().splitlines()
                if line.startswith("Requires-Dist:")]
    tpu = plugin_families(FAMILY, requires)["tpu"]
    specifier = tpu.specifier("libtpu")
    assert specifier is not None
    assert any(specifier.contains(v) for v in index.listing("libtpu").versions())
    assert FAMILY.unpinned(["libtpu"]) == ["libtpu"]
