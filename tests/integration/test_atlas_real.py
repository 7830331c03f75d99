"""`jaxrel atlas` on real wheels: jax 0.5.0, 0.7.2 and 0.10.2, each on its newest admitted jaxlib.

These releases sit on the boundaries the compat suite got wrong or could not see: jax 0.5.0 still
requires ``infer_sharding_from_operands`` (the rule-only custom_partitioning test must be "not yet"
there, not fail), ``jax.extend.ffi.ffi_call`` is gone from 0.7.x, and 0.10.x removed ``pvary``,
``.vma`` and ``jax.ad_checkpoint.checkpoint``. The GSPMD test whose callback raises aborts its
interpreter on every release: it must fail alone, with the rest of the suite recorded after it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jaxrel.cli import main

RULE_ONLY = "test_custom_partitioning.py::test_sharding_rule_propagates_the_result_sharding_to_the_operand"
ABORTS = "test_custom_partitioning.py::test_gspmd_an_error_in_infer_sharding_from_operands_reaches_the_caller"
COLUMNS = ("0.5.0/0.5.0", "0.7.2/0.7.2", "0.10.2/0.10.2")


@pytest.fixture(scope="module")
def atlas(index_reachable: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("atlas")
    code = main(["atlas", "--frontends", "0.5.0,0.7.2,0.10.2", "--backends", "newest", "--workdir", str(workdir)])
    data: dict[str, Any] = json.loads((workdir / "atlas.json").read_text(encoding="utf-8"))
    data["exit"], data["workdir"] = code, workdir
    return data


def cells(atlas: dict[str, Any], api: str) -> dict[str, str]:
    (row,) = [row for row in atlas["rows"] if row["api"] == api]
    return {key: cell["state"] for key, cell in row["cells"].items()}


@pytest.mark.long("its module's fixture runs the atlas: real jax releases, each on its oldest and newest jaxlib")
def test_every_cell_measured_with_the_time_split(atlas):
    assert atlas["exit"] == 0
    assert [c["key"] for c in atlas["columns"]] == list(COLUMNS)
    for column in atlas["columns"]:
        assert column["problem"] is None
        assert {"environment", "guard", "import jax", "suite", "cell"} <= set(column["timings"]), column
    for name in ("atlas.md", "atlas.html"):
        assert (Path(atlas["workdir"]) / name).is_file()


def test_the_rule_only_custom_partitioning_test_waits_for_jax_0_5_1(atlas):
    # gated at 0.5.0 it failed there: TypeError, def_partition() missing infer_sharding_from_operands
    assert cells(atlas, RULE_ONLY) == {"0.5.0/0.5.0": "not yet", "0.7.2/0.7.2": "works", "0.10.2/0.10.2": "works"}
    (row,) = [row for row in atlas["rows"] if row["api"] == RULE_ONLY]
    assert "needs jax >= 0.5.1" in row["cells"]["0.5.0/0.5.0"]["detail"]


def test_an_aborting_gspmd_callback_fails_one_test_and_the_suite_goes_on(atlas):
    assert set(cells(atlas, ABORTS).values()) == {"fails"}
    workdir = Path(atlas["workdir"])
    for record in workdir.glob("jax*/runs/*/record/main.json"):
        outcomes = json.loads(record.read_text(encoding="utf-8"))["outcomes"]
        assert outcomes[ABORTS]["outcome"] == "skipped" and outcomes[ABORTS]["message"] == "xfail"
        later = [test for test in outcomes if test.startswith(("test_ffi.py", "test_transforms.py"))]
        assert later and all(outcomes[test]["outcome"] != "error" for test in later), record


def test_jax_extend_ffi_call_is_removed_in_0_7_with_jax_ffi_as_its_replacement(atlas):
    assert cells(atlas, "jax.extend.ffi.ffi_call") == {
        "0.5.0/0.5.0": "works", "0.7.2/0.7.2": "removed", "0.10.2/0.10.2": "removed"}
    (row,) = [row for row in atlas["rows"] if row["api"] == "jax.extend.ffi.ffi_call"]
    assert row["cells"]["0.7.2/0.7.2"]["detail"] == "removed in 0.7.0 → use jax.ffi.ffi_call"
    assert row["removed_in"] == "0.7.2" and row["mismatch"] is None


@pytest.mark.parametrize(("api", "replacement"), [
    ("jax.lax.pvary", "jax.lax.pcast"),
    ("jax.typeof(x).vma", "jax.typeof(x).mat.varying"),
    ("jax.ad_checkpoint.checkpoint", "jax.checkpoint"),
])
def test_removals_of_jax_0_10_are_reported_with_their_replacement(atlas, api, replacement):
    (row,) = [row for row in atlas["rows"] if row["api"] == api]
    assert row["cells"]["0.10.2/0.10.2"]["state"] == "removed"
    assert row["replaced_by"] == replacement and row["mismatch"] is None
    assert cells(atlas, replacement)["0.10.2/0.10.2"] == "works"
