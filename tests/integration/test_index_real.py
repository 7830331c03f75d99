"""The index client and wheel inspection on the real index and real wheels.

Downloads land in jaxrel's shared cache (``~/.cache/jaxrel/files``, by sha256), so a
rerun fetches nothing; the measured release data (jaxrel/data/jax.json) is the oracle.
"""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jaxrel import releasedata
from jaxrel.cells.matrix import FrontendSpec, installable_versions
from jaxrel.cells.planning import matrix_for
from jaxrel.distributions.index import Index, IndexClientError, sha256_of
from jaxrel.distributions.pythons import find_pythons, supported_tags
from jaxrel.distributions.wheels import WheelError, inspect
from jaxrel.family import jax_profile

pytestmark = pytest.mark.integration
FAMILY = jax_profile()
MEASURED = releasedata.builtin("jax")


@pytest.fixture(scope="module")
def index(index_reachable) -> Index:
    return Index.from_pip()


def test_listing_holds_every_measured_release_with_hashes(index):
    listing = index.listing("jaxlib")
    versions = {str(v) for v in listing.versions()}
    assert set(MEASURED["jaxlib"]) <= versions
    assert "0.4.32" in versions  # listed although every file is yanked
    assert all(f.yanked is not None for f in listing.files_for("0.4.32"))
    for version, row in MEASURED["jaxlib"].items():
        file = next((f for f in listing.files_for(version) if f.filename == row["wheel"]), None)
        assert file is not None and file.sha256 == row["sha256"], version


def test_real_wheels_are_verified_and_inspected(index):
    jaxlib = next(f for f in index.listing("jaxlib").files if f.filename == MEASURED["jaxlib"]["0.10.2"]["wheel"])
    path = index.download(jaxlib)
    assert sha256_of(path) == jaxlib.sha256
    info = inspect(path, FAMILY, use_cache=False)
    assert info.api_numbers["jaxlib_extension_version"] == MEASURED["jaxlib"]["0.10.2"]["jaxlib_extension_version"]
    assert info.xla_ffi_api == MEASURED["jaxlib"]["0.10.2"]["xla_ffi_api"]
    assert info.tags == ["cp311-cp311-manylinux_2_27_x86_64"]
    assert inspect(path, FAMILY).api_numbers == info.api_numbers  # from the cache, by hash

    jax = index.listing("jax")
    for version in ("0.10.2", "0.12.0.1"):
        sdist = jax.sdist(version)
        assert sdist is not None
        front = inspect(index.download(sdist), FAMILY, sha256=sdist.sha256)
        assert front.minimum_backend == MEASURED["jax"][version]["minimum_jaxlib"]
        assert [str(front.requirements_on("jaxlib"))] == [
            str(SpecifierSet(r.removeprefix("jaxlib"))) for r in MEASURED["jax"][version]["requires_jaxlib"]]


def test_tampered_wheelhouse_file_is_refused_with_its_name(index, tmp_path):
    wheel_file = next(f for f in index.listing("jax").files if f.filename == "jax-0.10.2-py3-none-any.whl")
    real = index.download(wheel_file)
    house = tmp_path / "wheelhouse"
    house.mkdir()
    copy = house / real.name
    shutil.copyfile(real, copy)
    with_house = Index(index.urls, [house])
    assert with_house.listing("jax").files_for("0.10.2")  # an intact copy is accepted
    with zipfile.ZipFile(real) as source, zipfile.ZipFile(copy, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "jax/version.py":  # a "looser" minimum, as a tamperer might write
                data = data.replace(b"_minimum_jaxlib_version = '0.10.1'", b"_minimum_jaxlib_version = '0.4.1'")
                assert b"'0.4.1'" in data
            target.writestr(item, data)
    with pytest.raises(IndexClientError, match=rf"{copy}: sha256 .* differs"):
        Index(index.urls, [house]).listing("jax")
    with pytest.raises(WheelError, match="jax/version.py does not match its RECORD"):
        inspect(copy, FAMILY, use_cache=False)  # also caught without any index to compare with


def test_wrong_index_hash_is_an_error_naming_the_file(index, tmp_path):
    good = next(f for f in index.listing("jax").files if f.filename == "jax-0.10.2-py3-none-any.whl")
    local = index.download(good)
    simple = tmp_path / "simple" / "jax"
    simple.mkdir(parents=True)
    (simple / "index.html").write_text(f'<a href="{local.as_uri()}#sha256={"f" * 64}">{local.name}</a>')
    lying = Index([(tmp_path / "simple").as_uri()])
    with pytest.raises(IndexClientError, match=rf"{local.name}: sha256 {good.sha256} does not match f{{64}}"):
        lying.download(lying.listing("jax").files[0])


@pytest.mark.parametrize(("frontend", "python"), [("0.10.2", "3.11"), ("0.12.0.1", "3.12")])
def test_matrix_holds_exactly_the_admitted_releases(index, frontend, python):
    if python not in find_pythons():
        pytest.skip(f"no Python {python} interpreter on this machine")
    row = MEASURED["jax"][frontend]
    # the cuda12 extra as these releases declare it (plugin families come from the frontend's extras)
    extra = f'jax-cuda12-plugin[with-cuda]<={frontend},>={frontend}; extra == "cuda12"'
    spec = FrontendSpec("jax", frontend, row["minimum_jaxlib"], "wheel", None, row["requires_python"], (extra,))
    matrix = matrix_for(FAMILY, index, spec, pythons=[python], plugin_sets=["cuda12"])
    admitted = [c.backend for c in matrix.cells if c.purpose == "admitted"]
    declared = SpecifierSet(row["requires_jaxlib"][0].removeprefix("jaxlib"))
    on_index = installable_versions(index.listing("jaxlib"), python, supported_tags(python))
    assert admitted == [str(v) for v in on_index if v in declared]  # the frontend's own declared range
    assert admitted[-1] == frontend and admitted[0] == row["minimum_jaxlib"]
    negative = {c.purpose: c for c in matrix.cells if c.expected == "refused"}
    assert set(negative) >= {"below-minimum", "mismatched-plugin"}
    below = [v for v in on_index if v < Version(row["minimum_jaxlib"])]
    assert negative["below-minimum"].backend == str(below[-1])


def test_matrix_command_formats(index_reachable, capsys):
    from jaxrel.cli import main

    assert main(["matrix", "--frontend", "jax==0.10.2", "--python", "3.11", "--format", "github"]) == 0
    jobs = json.loads(capsys.readouterr().out)["include"]
    assert {job["cell"] for job in jobs} >= {"py3.11-jaxlib0.10.1", "py3.11-jaxlib0.10.2", "py3.11-jaxlib0.10.0"}
    assert main(["matrix", "--frontend", "jax==9.9.9", "--python", "3.11"]) == 2
    assert "jax 9.9.9 is not on the index" in capsys.readouterr().err


def test_cli_refuses_an_index_url_folder_that_is_not_there(tmp_path, capsys):
    from jaxrel.cli import main

    code = main(["matrix", "--frontend", "jax==0.10.2", "--index-url", (tmp_path / "nowhere").as_uri(),
                 "--workdir", str(tmp_path / "w")])
    assert code == 2  # a folder named on the command line that is not there is bad input, refused before anything
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jaxrel matrix: error: --index-url {(tmp_path / 'nowhere').as_uri()}: {tmp_path / 'nowhere'} is "
                   "not a directory; pass the folder of a PEP 503 index (the one holding a folder per project)"]
    assert not (tmp_path / "w" / "frontend").exists()
