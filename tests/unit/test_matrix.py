"""The matrix builder on a recorded index listing (tests/data/listings.json, scripts/record_listings.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jaxrel import policy
from jaxrel.cells.matrix import FrontendSpec, MatrixError, build_matrix, installable_versions
from jaxrel.distributions.index import IndexFile, Listing
from jaxrel.distributions.pythons import supported_tags
from jaxrel.family import jax_profile

DATA = Path(__file__).parents[1] / "data" / "listings.json"
LINUX = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
         "linux_x86_64"]
FAMILY = jax_profile()
# jax 0.10.2's cuda12 extras (its real METADATA; the recorded listings keep the other families from 0.11 on)
JAX_0_10_2_REQUIRES = (
    'jaxlib<=0.10.2,>=0.10.2; extra == "cuda12"',
    'jax-cuda12-plugin[with-cuda]<=0.10.2,>=0.10.2; extra == "cuda12"',
    'jaxlib<=0.10.2,>=0.10.2; extra == "cuda12-local"',
    'jax-cuda12-plugin<=0.10.2,>=0.10.2; extra == "cuda12-local"',
)
# jax 0.12.0.1's Requires-Dist, every line of its real METADATA
JAX_0_12_0_1_REQUIRES = (
    'jaxlib<=0.12.0.1,>=0.11.2',
    'ml_dtypes>=0.5.0',
    'numpy>=2.2',
    'opt_einsum',
    'scipy>=1.15',
    'jaxlib==0.11.2; extra == "minimum-jaxlib"',
    'jaxlib==0.11.2; extra == "ci"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "tpu"',
    'libtpu==0.0.50.*; extra == "tpu"',
    'requests; extra == "tpu"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda"',
    'jax-cuda12-plugin[with-cuda]<=0.12.0.1,>=0.12.0.1; extra == "cuda"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda12"',
    'jax-cuda12-plugin[with-cuda]<=0.12.0.1,>=0.12.0.1; extra == "cuda12"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda13"',
    'jax-cuda13-plugin[with-cuda]<=0.12.0.1,>=0.12.0.1; extra == "cuda13"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda12-local"',
    'jax-cuda12-plugin<=0.12.0.1,>=0.12.0.1; extra == "cuda12-local"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda13-local"',
    'jax-cuda13-plugin<=0.12.0.1,>=0.12.0.1; extra == "cuda13-local"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "rocm7-local"',
    'jax-rocm7-plugin==0.12.0.1.*; extra == "rocm7-local"',
    'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "oneapi"',
    'jax-oneapi-plugin[with-oneapi]<=0.12.0.1,>=0.12.0.1; extra == "oneapi"',
    'kubernetes; extra == "k8s"',
    'xprof; extra == "xprof"',
)
JAX_0_10_2 = FrontendSpec("jax", "0.10.2", "0.10.1", "wheel", "<=0.10.2,>=0.10.1", ">=3.11",
                          JAX_0_10_2_REQUIRES)
JAX_0_12_0_1 = FrontendSpec("jax", "0.12.0.1", "0.11.2", "sdist", "<=0.12.0.1,>=0.11.2", ">=3.12",
                            JAX_0_12_0_1_REQUIRES)


@pytest.fixture(scope="module")
def listings() -> dict[str, Listing]:
    record = json.loads(DATA.read_text())
    return {project: Listing(project, [IndexFile(url=f"https://index.invalid/{f['filename']}", source="recorded", **f)
                                       for f in files])
            for project, files in record.items()}


def tags(python: str) -> dict[str, list]:
    return {python: supported_tags(python, LINUX)}


def backends_of(matrix, purpose: str = "admitted") -> list[str]:
    return [cell.backend for cell in matrix.cells if cell.purpose == purpose]


def test_jax_0_10_2_on_python_3_11(listings):
    matrix = build_matrix(FAMILY, JAX_0_10_2, listings, tags("3.11"), plugin_sets=["cuda12"])
    assert backends_of(matrix) == ["0.10.1", "0.10.2"]
    assert [(c.id, c.purpose, c.expected) for c in matrix.cells] == [
        ("py3.11-jaxlib0.10.1", "admitted", "accepted"),
        ("py3.11-jaxlib0.10.2", "admitted", "accepted"),
        ("py3.11-jaxlib0.10.2-cuda12", "plugins", "accepted"),
        ("py3.11-jaxlib0.10.0", "below-minimum", "refused"),
        ("py3.11-jaxlib0.10.2-cuda12@0.10.1", "mismatched-plugin", "refused"),
    ]
    by_id = {c.id: c for c in matrix.cells}
    assert by_id["py3.11-jaxlib0.10.0"].rules == ("backend-at-least-minimum",)
    assert by_id["py3.11-jaxlib0.10.0"].fix == 'pip install "jaxlib>=0.10.1,<=0.10.2"'
    assert by_id["py3.11-jaxlib0.10.2-cuda12@0.10.1"].rules == ("plugin-matches-backend",)
    assert by_id["py3.11-jaxlib0.10.2-cuda12"].plugins == (
        ("jax-cuda12-plugin", "0.10.2"), ("jax-cuda12-pjrt", "0.10.2"))
    # jaxlib 0.11+ has no cp311 wheel, so no newer-than-frontend cell can run on 3.11: said, not hidden
    assert any("newer than jax 0.10.2" in note for note in matrix.notes)


def test_jax_0_12_0_1_on_python_3_12(listings):
    matrix = build_matrix(FAMILY, JAX_0_12_0_1, listings, tags("3.12"), plugin_sets=["cuda12"])
    assert backends_of(matrix) == ["0.11.2", "0.12.0", "0.12.0.1"]
    assert backends_of(matrix, "below-minimum") == ["0.11.1"]
    assert backends_of(matrix, "mismatched-plugin") == ["0.12.0.1"]
    assert all(c.expected == ("refused" if c.purpose in ("below-minimum", "mismatched-plugin") else "accepted")
               for c in matrix.cells)


def test_newer_than_frontend_cell_where_one_is_installable(listings):
    matrix = build_matrix(FAMILY, JAX_0_10_2, listings, tags("3.12"), plugin_sets=[])
    newer = [c for c in matrix.cells if c.purpose == "newer-than-frontend"]
    assert [(c.backend, c.expected, c.rules) for c in newer] == [
        ("0.11.0", "refused", ("backend-not-newer-than-frontend",))]


def test_admitted_cells_equal_the_declared_range_for_every_pair(listings):
    """The policy's admitted set equals the frontend's Requires-Dist range over the installable releases."""
    for spec, python in ((JAX_0_10_2, "3.11"), (JAX_0_12_0_1, "3.12"), (JAX_0_10_2, "3.12")):
        matrix = build_matrix(FAMILY, spec, listings, tags(python), negatives=False)
        installable = installable_versions(listings["jaxlib"], python, supported_tags(python, LINUX))
        declared = [str(v) for v in installable if v in SpecifierSet(spec.backend_range or "")]
        assert backends_of(matrix) == declared
        # issue #16 adds notes on extras the index cannot satisfy; no other note may appear
        assert [n for n in matrix.notes if "cannot be installed from the index" not in n] == []


def test_yanked_and_foreign_platform_releases_are_not_cells(listings):
    versions = [str(v) for v in installable_versions(listings["jaxlib"], "3.11", supported_tags("3.11", LINUX))]
    assert "0.4.32" not in versions  # yanked on the index
    assert "0.4.30" in versions
    mac_only = build_matrix(FAMILY, JAX_0_10_2, listings, {"3.11": supported_tags("3.11", ["macosx_11_0_arm64"])},
                            negatives=False)
    assert backends_of(mac_only) == ["0.10.1", "0.10.2"]  # the recorded macOS wheels
    with pytest.raises(MatrixError, match="no jaxlib release admitted"):
        build_matrix(FAMILY, JAX_0_10_2, listings, {"3.11": supported_tags("3.11", ["win_amd64"])})


def test_backend_filter_and_plugins_on_every_backend(listings):
    matrix = build_matrix(FAMILY, JAX_0_12_0_1, listings, tags("3.12"), backends=SpecifierSet(">=0.12.0"),
                          plugin_sets=["cuda12"], plugins_on="all", negatives=False)
    assert backends_of(matrix) == ["0.12.0", "0.12.0.1"]
    assert backends_of(matrix, "plugins") == ["0.12.0", "0.12.0.1"]
    only = build_matrix(FAMILY, JAX_0_12_0_1, listings, tags("3.12"), backends={Version("0.11.2")}, negatives=False)
    assert backends_of(only) == ["0.11.2"]


def test_bad_requests_are_refused_with_the_fix(listings):
    with pytest.raises(MatrixError, match="unknown plugin set 'cuda99'.*cuda12"):
        build_matrix(FAMILY, JAX_0_10_2, listings, tags("3.11"), plugin_sets=["cuda99"])
    with pytest.raises(MatrixError, match="choose another --python or --backends"):
        build_matrix(FAMILY, JAX_0_10_2, listings, tags("3.11"), backends=SpecifierSet(">=0.11"))
    with pytest.raises(MatrixError, match="plugins_on"):
        build_matrix(FAMILY, JAX_0_10_2, listings, tags("3.11"), plugins_on="some")


def test_several_pythons_and_selection(listings):
    matrix = build_matrix(FAMILY, JAX_0_10_2, listings, {**tags("3.11"), **tags("3.12")}, plugin_sets=[])
    assert {c.python for c in matrix.cells} == {"3.11", "3.12"}
    assert len({c.id for c in matrix.cells}) == len(matrix.cells)
    one = matrix.select(["py3.12-jaxlib0.10.[12]"])
    assert [c.id for c in one.cells] == ["py3.12-jaxlib0.10.1", "py3.12-jaxlib0.10.2"]
    with pytest.raises(MatrixError, match="no cell matches"):
        matrix.select(["py3.9-*"])


def test_expected_verdicts_agree_with_the_policy(listings):
    matrix = build_matrix(FAMILY, JAX_0_12_0_1, listings, tags("3.12"), plugin_sets=["cuda12"])
    for cell in matrix.cells:
        result = policy.verdict(
            backend=policy.Pin("jaxlib", Version(cell.backend)), frontend=policy.Pin("jax", Version("0.12.0.1")),
            minimum_backend=Version("0.11.2"), plugins=[policy.Pin(n, Version(v)) for n, v in cell.plugins],
        )
        assert (cell.expected == "accepted") == result.compatible, cell.id


def test_output_formats(listings):
    matrix = build_matrix(FAMILY, JAX_0_10_2, listings, tags("3.11"), plugin_sets=["cuda12"])
    github = json.loads(matrix.to_github())
    assert [job["cell"] for job in github["include"]] == [c.id for c in matrix.cells]
    assert github["include"][2]["plugins"] == "jax-cuda12-plugin==0.10.2 jax-cuda12-pjrt==0.10.2"
    assert {job["shard"] for job in github["include"]} == {"1/1"}
    sharded = json.loads(matrix.to_github(shards=3))["include"]
    positive = [c.id for c in matrix.cells if not c.negative]
    assert [(job["cell"], job["shard"]) for job in sharded if job["cell"] in positive] == [
        (cell, f"{i}/3") for cell in positive for i in (1, 2, 3)]
    assert [job["shard"] for job in sharded if job["cell"] not in positive] == ["1/1", "1/1"], "negatives run no tests"
    assert sharded[0]["name"] == "py3.11-jaxlib0.10.1-1of3" and github["include"][0]["name"] == "py3.11-jaxlib0.10.1"
    with pytest.raises(MatrixError, match="shards must be at least 1"):
        matrix.to_github(shards=0)
    document = matrix.to_json()
    assert document["frontend"]["minimum_backend"] == "0.10.1" and len(document["cells"]) == 5
    markdown = matrix.to_markdown()
    row = "| `py3.11-jaxlib0.10.0` | 3.11 | 0.10.0 | – | below-minimum | refused (backend-at-least-minimum) |"
    assert row in markdown


TPU_LINUX = ["manylinux_2_31_x86_64", *LINUX]  # libtpu wheels are manylinux_2_31


def test_plugin_families_come_from_the_extras():
    from jaxrel.distributions.extras import plugin_families

    families = plugin_families(FAMILY, JAX_0_12_0_1_REQUIRES)
    assert list(families) == ["tpu", "cuda12", "cuda13", "rocm7", "oneapi"]
    assert families["cuda12"].extras == ("cuda", "cuda12", "cuda12-local")
    assert families["cuda12"].distributions == ("jax-cuda12-plugin", "jax-cuda12-pjrt")
    assert families["rocm7"].extras == ("rocm7-local",) and not families["rocm7"].pinned
    assert families["rocm7"].released_separately
    assert families["tpu"].distributions == ("libtpu",) and families["tpu"].runtime
    assert str(families["tpu"].specifier("libtpu")) == "==0.0.50.*"
    assert families["oneapi"].pinned and families["cuda13"].pinned
    # what the extras ask of the plugins: jax[cuda13] wants jax-cuda13-plugin[with-cuda]; cuda13-local does not
    assert families["cuda13"].with_extras == (("jax-cuda13-plugin", "with-cuda"),)
    assert families["cuda13"].local_extras == ("cuda13-local",)
    assert families["oneapi"].with_extras == (("jax-oneapi-plugin", "with-oneapi"),)
    assert families["oneapi"].local_extras == () and families["rocm7"].with_extras == ()


def test_local_flavours_are_families_of_their_own():
    from jaxrel.cells.matrix import known_plugin_sets
    from jaxrel.distributions.extras import local_flavour, plugin_families

    families = plugin_families(FAMILY, JAX_0_12_0_1_REQUIRES)
    local = local_flavour(families["cuda13"])
    assert local is not None and local.name == "cuda13-local" and local.local
    assert local.extras == ("cuda13-local",) and local.with_extras == ()
    assert local.distributions == families["cuda13"].distributions
    assert local_flavour(families["rocm7"]) is None, "only a local flavour: the family itself"
    assert local_flavour(families["oneapi"]) is None, "no -local extra"
    assert list(known_plugin_sets(FAMILY, JAX_0_12_0_1)) == [
        "tpu", "cuda12", "cuda12-local", "cuda13", "cuda13-local", "rocm7", "oneapi"]


def test_default_plugin_families_of_jax_0_12_0_1(listings):
    from jaxrel.cells.matrix import known_plugin_sets

    sets = list(known_plugin_sets(FAMILY, JAX_0_12_0_1))
    matrix = build_matrix(FAMILY, JAX_0_12_0_1, listings, {"3.12": supported_tags("3.12", TPU_LINUX)},
                          plugin_sets=sets)
    cells = {c.id: c for c in matrix.cells}
    assert cells["py3.12-jaxlib0.12.0.1-cuda13"].plugins == (
        ("jax-cuda13-plugin", "0.12.0.1"), ("jax-cuda13-pjrt", "0.12.0.1"))
    assert cells["py3.12-jaxlib0.12.0.1-cuda13@0.12.0"].rules == ("plugin-matches-backend",)
    assert cells["py3.12-jaxlib0.12.0.1-cuda12@0.12.0"].expected == "refused"
    # ROCm: the newest admitted jaxlib the index has a ROCm release for, accepted (exempt)
    assert cells["py3.12-jaxlib0.12.0-rocm7"].plugins == (("jax-rocm7-plugin", "0.12.0"), ("jax-rocm7-pjrt", "0.12.0"))
    assert cells["py3.12-jaxlib0.12.0-rocm7"].expected == "accepted"
    assert cells["py3.12-jaxlib0.11.2-oneapi"].plugins == (
        ("jax-oneapi-plugin", "0.11.2"), ("jax-oneapi-pjrt", "0.11.2"))
    # libtpu at the newest release the tpu extra's pin (==0.0.50.*) admits
    assert cells["py3.12-jaxlib0.12.0.1-tpu"].plugins == (("libtpu", "0.0.50.1"),)
    assert not any(c.id.endswith(("-rocm7@", "-tpu@")) for c in matrix.cells)
    # the local flavour is a cell of its own, with no plugin extra; its mismatch is its family's cell
    local = cells["py3.12-jaxlib0.12.0.1-cuda13-local"]
    assert local.local and local.with_extras == () and local.plugins == cells["py3.12-jaxlib0.12.0.1-cuda13"].plugins
    assert cells["py3.12-jaxlib0.12.0.1-cuda13"].with_extras == (("jax-cuda13-plugin", "with-cuda"),)
    assert not cells["py3.12-jaxlib0.12.0.1-cuda13"].local
    assert not any("-local@" in c.id for c in matrix.cells)
    assert [(u["extra"], u["requirement"], u["newest"], u["released_separately"]) for u in matrix.unsatisfiable] == [
        ("rocm7-local", "jax-rocm7-plugin==0.12.0.1.*", "0.12.0", True),
        ("oneapi", "jax-oneapi-plugin<=0.12.0.1,>=0.12.0.1", "0.11.2", True),  # released separately, as ROCm
    ]
    assert any("jax==0.12.0.1[oneapi] cannot be installed" in n and "0.11.2" in n for n in matrix.notes)
    assert matrix.to_json()["unsatisfiable"] == matrix.unsatisfiable


def test_rocm_post_release_stands_for_its_jaxlib(listings):
    from jaxrel.distributions.extras import plugin_families

    rocm = plugin_families(FAMILY, JAX_0_12_0_1_REQUIRES)["rocm7"]
    from jaxrel.cells.matrix import _plugin_pins

    pins = _plugin_pins(rocm, Version("0.11.0"), listings, "3.12", supported_tags("3.12", LINUX))
    assert pins == [("jax-rocm7-plugin", "0.11.0.post1"), ("jax-rocm7-pjrt", "0.11.0.post1")]


def test_no_plugin_cell_is_said_not_hidden(listings):
    # on Python 3.12 without manylinux_2_31, libtpu has no wheel: a line says so
    matrix = build_matrix(FAMILY, JAX_0_12_0_1, listings, tags("3.12"), plugin_sets=["tpu"])
    assert not any(c.id.endswith("-tpu") for c in matrix.cells)
    assert any("plugin set tpu (libtpu) has no installable release" in n for n in matrix.notes)


def test_unknown_plugin_set_names_the_families_of_the_extras(listings):
    with pytest.raises(MatrixError, match="has: tpu, cuda12, cuda12-local, cuda13, cuda13-local, rocm7, oneapi"):
        build_matrix(FAMILY, JAX_0_12_0_1, listings, tags("3.12"), plugin_sets=["cuda11"])


def test_github_matrix_labels_the_device_each_plugin_cell_needs() -> None:
    from jaxrel.cells.matrix import Cell, Matrix

    cells = [Cell("a", "3.12", "0.12.0.1", (), "admitted", "accepted"),
             Cell("b", "3.12", "0.12.0.1", (("jax-cuda12-plugin", "0.12.0.1"),), "plugins", "accepted"),
             Cell("c", "3.12", "0.12.0.1", (("libtpu", "0.0.50.1"),), "plugins", "accepted"),
             Cell("d", "3.12", "0.12.0.1", (("jax-cuda12-plugin", "0.12.0"),), "mismatched-plugin", "refused")]
    spec = FrontendSpec("jax", "0.12.0.1", "0.11.2", "test", None, None)
    jobs = json.loads(Matrix("jax", spec, "jaxlib", cells).to_github())["include"]
    assert [job["device"] for job in jobs] == ["", "gpu", "tpu", ""]
