"""The free-threaded slots of the extension's release grid (``jaxrel build --wheels all``): the ABIs the pinned
backend ships for the machine, each built by the interpreter here that has that ABI, or not built with the reason."""

from __future__ import annotations

from jaxrel.distributions.pages import IndexFile, Listing
from jaxrel.distributions.pythons import Python
from jaxrel.extension.free_threaded import plan_slots, shipped_abis

# jaxlib 0.10.2's files as the index lists them (names only), with a newer release's and an sdist
FILES = [
    "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl",
    "jaxlib-0.10.2-cp313-cp313-manylinux_2_27_x86_64.whl",
    "jaxlib-0.10.2-cp313-cp313t-manylinux_2_27_x86_64.whl",
    "jaxlib-0.10.2-cp313-cp313t-manylinux_2_27_aarch64.whl",
    "jaxlib-0.10.2-cp314-cp314t-manylinux_2_27_x86_64.whl",
    "jaxlib-0.10.2-cp314-cp314t-macosx_11_0_arm64.whl",
    "jaxlib-0.10.2-cp314-cp314-manylinux_2_27_x86_64.whl",
    "jaxlib-0.12.0-cp315-cp315t-manylinux_2_27_x86_64.whl",
    "jaxlib-0.10.2.tar.gz",
]
LISTING = Listing("jaxlib", [IndexFile(name, f"file:///{name}", "test") for name in FILES])


def test_the_free_threaded_abis_of_the_pinned_release_on_the_machine() -> None:
    assert shipped_abis(LISTING, "0.10.2", "x86_64") == ["cp313t", "cp314t"]
    assert shipped_abis(LISTING, "0.10.2", "aarch64") == ["cp313t"]
    assert shipped_abis(LISTING, "0.12.0", "x86_64") == ["cp315t"]
    assert shipped_abis(LISTING, "0.9.0", "x86_64") == []


def test_each_slot_is_built_by_its_interpreter_or_says_why_not() -> None:
    here = {"3.13t": Python("3.13t", "/cache/python3.13t"), "3.14": Python("3.14", "/usr/bin/python3.14")}
    built, missing = plan_slots(["cp313t", "cp314t"], here, "jaxlib 0.10.2")
    assert (built.abi, built.python, built.reason, built.version) == ("cp313t", here["3.13t"], "", "3.13t")
    assert missing.python is None and missing.version == "3.14t"
    assert missing.reason.startswith("no 3.14t interpreter here (jaxlib 0.10.2 ships cp314t wheels); "
                                     "scripts/free_threaded_python.sh 3.14 SUITE builds one"), missing.reason
