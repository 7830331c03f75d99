"""The API atlas table (pure): states from recorded outcomes, boundaries, mismatches, flags, renderings;
and which frontend releases an atlas run measures by default."""

from __future__ import annotations

import json

import pytest

from jaxrel.atlas import measure as atlas
from jaxrel.atlas import table as atlastable
from jaxrel.atlas.table import CellRun, Observation
from jaxrel.cells.frontend import CompatError
from jaxrel.errors import BadInput

PVARY = "test_api.py::test_api[jax.lax.pvary]"
PCAST = "test_api.py::test_api[jax.lax.pcast]"
OFFLOAD = "test_api.py::test_api[jax.checkpoint_policies.offload_dot_with_no_batch_dims]"
GPU = "test_plugins.py::test_jit_matmul_on_gpu"
REMOVED = {"api_state": "removed in 0.10.0 → use jax.lax.pcast", "replaced_by": "jax.lax.pcast"}
NOT_YET = {"api_state": "not yet", "since": "0.8.2"}


def run(frontend: str, backend: str, outcomes: dict[str, tuple[str, str]],
        properties: dict[str, dict[str, str]] | None = None) -> CellRun:
    return CellRun(frontend, backend, "3.12", {k: {"outcome": o, "message": m} for k, (o, m) in outcomes.items()},
                   properties or {})


def cells() -> list[CellRun]:
    """Four cells listed out of order, as measured: pvary removed in 0.10, offload differing by jaxlib."""
    return [
        run("0.10.2", "0.10.2", {PVARY: ("passed", ""), PCAST: ("passed", ""), OFFLOAD: ("passed", ""),
                                  GPU: ("skipped", "no GPU")}, {PVARY: REMOVED}),
        run("0.4.30", "0.4.27", {PVARY: ("skipped", "needs jax >= 0.6.0, installed jax 0.4.30"),
                                  PCAST: ("skipped", "needs jax >= 0.8.2"), OFFLOAD: ("failed", "NotImplementedError: "
                                  "memory_kind | not supported"), GPU: ("skipped", "no GPU")},
            {PVARY: {**NOT_YET, "replaced_by": "jax.lax.pcast"}, PCAST: NOT_YET,
             OFFLOAD: {"jaxlib_sensitive": "CPU offload"}}),
        run("0.9.2", "0.9.2", {PVARY: ("passed", ""), PCAST: ("passed", ""), OFFLOAD: ("passed", "")}),
        run("0.4.30", "0.4.30", {PVARY: ("skipped", "needs jax >= 0.6.0"), PCAST: ("skipped", "needs jax >= 0.8.2"),
                                  OFFLOAD: ("passed", "")}, {PVARY: NOT_YET, PCAST: NOT_YET}),
    ]


def test_state_of_each_recorded_outcome():
    assert atlastable.state_of({"outcome": "passed"}, {}) == Observation("works")
    assert atlastable.state_of({"outcome": "passed"}, REMOVED) == Observation("removed", REMOVED["api_state"])
    assert atlastable.state_of({"outcome": "skipped", "message": "needs jax >= 0.8.2"}, NOT_YET).state == "not yet"
    assert atlastable.state_of({"outcome": "skipped", "message": "no GPU"}, {}) == Observation("skipped", "no GPU")
    assert atlastable.state_of({"outcome": "skipped", "message": "xfail"}, {}).state == "fails"
    assert atlastable.state_of({"outcome": "error", "message": "E boom"}, {}) == Observation("fails", "E boom")
    gone = {"outcome": "failed", "message": "ImportError: cannot import name 'x' from 'jax.y' "
                                           "(/build/atlas/jax0.10.2/envs/py3.12/lib/python3.12/site-packages/jax/y.py)"}
    assert atlastable.state_of(gone, {}).detail.endswith("from 'jax.y' (site-packages/jax/y.py)")


def test_columns_are_ordered_by_jax_then_jaxlib_and_boundaries_are_measured():
    table = atlastable.build(cells(), "2026-11-25")
    assert [c.key for c in table.columns] == ["0.4.30/0.4.27", "0.4.30/0.4.30", "0.9.2/0.9.2", "0.10.2/0.10.2"]
    rows = {row.api: row for row in table.rows}
    pvary = rows["jax.lax.pvary"]
    assert (pvary.first_works, pvary.removed_in, pvary.last_works) == ("0.9.2", "0.10.2", "0.9.2")
    assert pvary.replaced_by == "jax.lax.pcast" and pvary.mismatch is None
    assert atlastable._removed_text(pvary) == "0.10.0 → use jax.lax.pcast (measured: removed 0.10.2, works 0.9.2)"
    assert rows["jax.lax.pcast"].first_works == "0.9.2" and rows["jax.lax.pcast"].removed_in is None
    assert atlastable._works_text(rows["jax.lax.pcast"]) == "0.8.2 (measured 0.9.2)"  # "not yet" on every 0.4.30


def test_a_declared_first_release_the_measurement_contradicts_is_not_shown():
    early = run("0.6.2", "0.6.2", {PCAST: ("failed", "AttributeError: no pcast")}, {PCAST: {"since": "0.6.0"}})
    late = run("0.9.2", "0.9.2", {PCAST: ("passed", "")}, {PCAST: {"since": "0.6.0"}})
    assert atlastable._works_text(atlastable.build([early, late], "d").rows[0]) == "0.9.2"


def test_a_row_that_never_ran_here_is_left_out():
    assert GPU not in {row.api for row in atlastable.build(cells(), "2026-11-25").rows}


def test_jaxlib_sensitive_rows_are_flagged_as_declared_and_as_measured():
    offload = {row.api: row for row in atlastable.build(cells(), "d").rows}[
        "jax.checkpoint_policies.offload_dot_with_no_batch_dims"]
    assert offload.jaxlib_sensitive == "CPU offload"
    assert offload.differs_by_jaxlib == ["0.4.30"]  # fails on jaxlib 0.4.27, works on 0.4.30


def test_a_documented_boundary_the_measurement_contradicts_is_reported():
    still_works = run("0.10.2", "0.10.2", {PVARY: ("failed", "Failed: jax.lax.pvary still works in jax 0.10.2")},
                      {PVARY: REMOVED})
    early = run("0.9.2", "0.9.2", {PVARY: ("passed", "")}, {PVARY: {"api_state": "removed in 0.9.0 → use X"}})
    row = atlastable.build([still_works], "d").rows[0]
    assert row.mismatch == "documented: removed in 0.10.0; measured otherwise on 0.10.2/0.10.2"
    assert atlastable.build([early], "d").rows[0].mismatch is None  # removed and documented so
    text = atlastable.markdown(atlastable.build([still_works], "d"))
    assert "- `jax.lax.pvary`: documented: removed in 0.10.0; measured otherwise on 0.10.2/0.10.2" in text


def test_a_cell_that_measured_nothing_marks_its_column():
    broken = CellRun("0.5.3", "0.5.3", "3.12", problem="environment: uv failed")
    table = atlastable.build([*cells(), broken], "d")
    assert table.rows[0].cells["0.5.3/0.5.3"] == Observation("cell failed", "environment: uv failed")


def test_markdown_json_and_html_carry_the_same_rows():
    table = atlastable.build(cells(), "2026-11-25", "measured here")
    text = atlastable.markdown(table)
    assert text.startswith("# API atlas\n\nMeasured 2026-11-25. measured here")
    assert ('<td class="api">jax.lax.pvary</td><td>0.8.2 (measured 0.9.2)</td><td>0.10.0 → use jax.lax.pcast'
            in text), "the table is the page's own HTML block (the docs site colours it and adds the filter)"
    assert atlastable.html_table(table) in text and "\n\n" not in atlastable.html_table(table)
    assert "memory_kind \\| not supported" in text  # a | in an error line does not split the table
    data = json.loads(atlastable.dumps(table))
    assert [row["api"] for row in data["rows"]] == [row.api for row in table.rows]
    assert data["rows"][0]["cells"]["0.10.2/0.10.2"] == {"state": "removed", "detail": REMOVED["api_state"]}
    page = atlastable.html_page(table)
    assert page.count("<tr data-search=") == len(table.rows) and 'id="filter"' in page


VERSIONS = ["0.4.29", "0.4.30", "0.4.31", "0.4.38", "0.5.0", "0.5.3", "0.6.0rc1", "0.6.2", "0.12.0", "0.12.0.1"]


def test_default_frontends_are_the_oldest_then_the_newest_of_each_minor_series():
    assert atlas.choose_frontends(VERSIONS, None) == ["0.4.30", "0.4.38", "0.5.3", "0.6.2", "0.12.0.1"]


def test_frontends_by_specifier_or_by_list():
    assert atlas.choose_frontends(VERSIONS, "jax>=0.5") == ["0.5.0", "0.5.3", "0.6.2", "0.12.0", "0.12.0.1"]
    assert atlas.choose_frontends(VERSIONS, "0.12.0.1,0.4.30") == ["0.4.30", "0.12.0.1"]
    with pytest.raises(CompatError, match="0.4.32 not released"):
        atlas.choose_frontends(VERSIONS, "0.4.32")
    with pytest.raises(BadInput, match="expected a specifier"):
        atlas.choose_frontends(VERSIONS, "jax>>1")


@pytest.mark.parametrize(("argv", "message"), [
    (["--frontends", "jax>>1"], "--frontends 'jax>>1': expected a specifier (jax>=0.4.30) or versions"),
    (["--cells-at-once", "0"], "--cells-at-once 0: expected 1 or more"),
])
def test_bad_atlas_options_are_one_line_and_exit_2_before_the_index_is_asked(argv, message, capsys):
    from jaxrel.cli import main

    assert main(["atlas", *argv, "--index-url", "http://127.0.0.1:9/simple/"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
