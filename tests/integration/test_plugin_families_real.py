"""Plugin family rules on real index listings and real plugin METADATA (skips when the index is unreachable)."""

from __future__ import annotations

import sys
import zipfile

import pytest
from packaging.version import Version

from jaxrel import policy
from jaxrel.distributions.extras import plugin_families
from jaxrel.distributions.index import Index
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


def test_the_release_data_holds_each_releases_tpu_pin_as_its_metadata_declares(index):
    """The runtime pins `verdict` uses come from the same METADATA the index serves."""
    for version in ("0.10.2", "0.12.0.1"):
        wheel = next(f for f in index.listing("jax").files_for(version) if f.filename.endswith("py3-none-any.whl"))
        with zipfile.ZipFile(index.download(wheel)) as archive:
            metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
        requires = [line.split(":", 1)[1].strip() for line in metadata.decode().splitlines()
                    if line.startswith("Requires-Dist:")]
        declared = plugin_families(FAMILY, requires)["tpu"].specifier("libtpu")
        assert FAMILY.runtime_pins(policy.Pin("jax", Version(version)))["libtpu"] == ("tpu", str(declared))


def test_jax_runs_on_cpu_with_another_libtpu_and_doctor_warns(index, tmp_path):
    """What jax does with a libtpu outside its tpu extra's pin, on a machine without a TPU: it loads it
    with no version check, TPU initialisation fails for lack of a device, and jax computes on the CPU.
    So another libtpu is a warning (doctor, verdict), not a refusal."""
    import json
    import subprocess

    from jaxrel.distributions import envs
    from jaxrel.distributions.pythons import PythonNotFound, python_for

    try:
        python = python_for("3.12").executable  # jax 0.12 needs Python 3.12
    except PythonNotFound as error:
        pytest.skip(str(error))
    env = envs.create(tmp_path / "env", python=python,
                      requirements=["jax==0.12.0.1", "jaxlib==0.12.0.1", "libtpu==0.0.40.*"])
    probe = ("import json, jax, jax.numpy as jnp, jax._src.xla_bridge as xb\n"
             "print(json.dumps({'sum': float(jnp.ones(3).sum()), 'platforms': sorted({d.platform for d in "
             "jax.devices()}), 'tpu_factory': 'tpu' in xb._backend_factories}))")
    done = env.run(str(env.python), "-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts == {"sum": 3.0, "platforms": ["cpu"], "tpu_factory": True}
    doctor = subprocess.run([sys.executable, "-m", "jaxrel", "doctor", "--python", str(env.python), "--json"],
                            capture_output=True, text=True)
    assert doctor.returncode == 0, doctor.stderr
    tpu = next(f for f in json.loads(doctor.stdout)["plugin_families"] if f["name"] == "tpu")
    assert tpu["verdict"] == "warning" and "outside jax 0.12.0.1[tpu]'s pin libtpu==0.0.50.*" in tpu["detail"]
    assert tpu["fix"] == 'pip install "libtpu==0.0.50.*"'
