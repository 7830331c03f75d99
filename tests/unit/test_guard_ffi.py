"""The guard's XLA FFI API check: reading c_api.h and refusing a backend whose API is too old."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from jaxrel import guard

if TYPE_CHECKING:
    from tests.conftest import Site

# Shaped like XLA's xla/ffi/api/c_api.h: licence, include guard, comments around the defines.
C_API_H = """\
/* Copyright 2023 The OpenXLA Authors.
Licensed under the Apache License, Version 2.0 (the "License");
==============================================================================*/

#ifndef XLA_FFI_API_C_API_H_
#define XLA_FFI_API_C_API_H_

#include <stddef.h>
#include <stdint.h>

// Incremented when an ABI-incompatible change is made to the interface.
//
// Major changes include:
// * Deleting a method or argument
#define XLA_FFI_API_MAJOR {major}

// Incremented when the interface is updated in a way that is potentially
// ABI-compatible with older versions, if supported by the caller and/or
// implementation.
#define XLA_FFI_API_MINOR {minor}

struct XLA_FFI_Api_Version {{
  size_t struct_size;
  int major_version;  // out
  int minor_version;  // out
}};

#endif  // XLA_FFI_API_C_API_H_
"""

CONSUMER = "rmsnorm 0.1.0"
FIX = 'pip install "jax>=0.9.1" "jaxlib>=0.9.1"'


@pytest.fixture(autouse=True)
def no_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(guard.SKIP_ENV, raising=False)


def extension_check(site: Site, minimum_ffi_api: str = "0.3", **kwargs: object) -> str | None:
    """The call an XLA FFI extension built against FFI API ``minimum_ffi_api`` makes."""
    arguments: dict = {"backend": "jaxlib", "minimum_backend": "0.9.1", "consumer": CONSUMER,
                       "minimum_ffi_api": minimum_ffi_api, "install_with": ("jax",), "path": site.path}
    return guard.check(**{**arguments, **kwargs})


# ffi_api_in / read_ffi_api / backend_ffi_api


def test_ffi_api_in_reads_a_real_looking_header() -> None:
    assert guard.ffi_api_in(C_API_H.format(major=0, minor=3)) == "0.3"
    assert guard.ffi_api_in(C_API_H.format(major=1, minor=12)) == "1.12"


def test_ffi_api_in_ignores_a_trailing_comment_after_the_number() -> None:
    text = "#define XLA_FFI_API_MAJOR 0  // breaking changes\n#define XLA_FFI_API_MINOR 4 /* additions */\n"
    assert guard.ffi_api_in(text) == "0.4"


def test_ffi_api_in_accepts_tabs_and_normalises_leading_zeros() -> None:
    assert guard.ffi_api_in("#define\tXLA_FFI_API_MAJOR\t0\n#define XLA_FFI_API_MINOR 05\n") == "0.5"


def test_ffi_api_in_ignores_commented_out_defines() -> None:
    text = "// #define XLA_FFI_API_MAJOR 9\n#define XLA_FFI_API_MAJOR 0\n#define XLA_FFI_API_MINOR 2\n"
    assert guard.ffi_api_in(text) == "0.2"


@pytest.mark.parametrize("text", [
    C_API_H.replace("#define XLA_FFI_API_MINOR {minor}\n", "").format(major=0),
    "#define XLA_FFI_API_MINOR 3\n",
    "#define XLA_FFI_API_MAJOR 0\n#define XLA_FFI_API_MINOR x\n",
    "",
])
def test_ffi_api_in_without_both_numbers_is_none(text: str) -> None:
    assert guard.ffi_api_in(text) is None


def test_read_ffi_api_of_a_missing_file_is_none(site: Site) -> None:
    assert guard.read_ffi_api(str(site.root / "no" / "c_api.h")) is None
    header = site.write("c_api.h", C_API_H.format(major=0, minor=1))
    assert guard.read_ffi_api(str(header)) == "0.1"


def test_backend_ffi_api_takes_the_first_path_entry_holding_the_header(site: Site) -> None:
    site.write("first/jaxlib/include/xla/ffi/api/c_api.h", C_API_H.format(major=0, minor=5))
    site.write("second/jaxlib/include/xla/ffi/api/c_api.h", C_API_H.format(major=0, minor=1))
    entries = [str(site.root / "empty"), str(site.root / "first"), str(site.root / "second")]
    assert guard.backend_ffi_api("jaxlib", "include/xla/ffi/api/c_api.h", entries) == "0.5"
    assert guard.backend_ffi_api("jaxlib", "include/xla/ffi/api/c_api.h", entries[2:]) == "0.1"
    assert guard.backend_ffi_api("jaxlib", "include/xla/ffi/api/c_api.h", entries[:1]) is None


# check(..., minimum_ffi_api=...)


@pytest.mark.parametrize(("version", "ffi"), [("0.9.1", (0, 3)), ("0.12.0", (0, 5))])
def test_accepts_a_backend_with_the_required_api_or_newer(site: Site, version: str, ffi: tuple[int, int]) -> None:
    site.jaxlib(version, ffi=ffi)
    assert extension_check(site) == version


def test_api_minor_numbers_compare_as_integers_not_text(site: Site) -> None:
    site.jaxlib("0.20.0", ffi=(0, 10))
    assert extension_check(site, minimum_ffi_api="0.9") == "0.20.0"
    with pytest.raises(guard.GuardError):
        extension_check(site, minimum_ffi_api="0.11")


def test_refuses_an_older_api_naming_versions_consumer_and_fix(site: Site) -> None:
    site.jaxlib("0.9.0", ffi=(0, 2))
    with pytest.raises(guard.GuardError) as info:
        extension_check(site)
    message = str(info.value)
    assert "jaxlib 0.9.0" in message
    assert "XLA FFI API 0.2" in message and "0.3" in message
    assert CONSUMER in message
    assert f"Fix: {FIX}" in message
    assert "JAXREL_SKIP_GUARD=1" in message
    assert info.value.fix == FIX
    assert info.value.installed == {"jaxlib": "0.9.0"}
    assert isinstance(info.value, ImportError)


def test_refuses_an_older_api_even_when_the_version_is_in_range(site: Site) -> None:
    site.jaxlib("0.10.0", ffi=(0, 2))  # the version alone would pass minimum_backend 0.9.1
    with pytest.raises(guard.GuardError, match="XLA FFI API 0.2") as info:
        extension_check(site)
    assert info.value.fix == FIX


def test_refuses_when_the_header_is_missing(site: Site) -> None:
    site.write("jaxlib/version.py", '_version = "0.10.2"\n')
    with pytest.raises(guard.GuardError) as info:
        extension_check(site)
    message = str(info.value)
    assert "no readable XLA FFI API" in message and "c_api.h" in message
    assert "jaxlib 0.10.2" in message and CONSUMER in message
    assert info.value.fix == FIX


def test_refuses_when_the_header_defines_no_api(site: Site) -> None:
    site.jaxlib("0.10.2")
    site.write("jaxlib/include/xla/ffi/api/c_api.h", "// emptied\n")
    with pytest.raises(guard.GuardError, match="no readable XLA FFI API"):
        extension_check(site)


def test_without_minimum_ffi_api_the_header_is_not_required(site: Site) -> None:
    site.write("jaxlib/version.py", '_version = "0.10.2"\n')
    assert extension_check(site, minimum_ffi_api=None) == "0.10.2"


def test_missing_backend_fix_installs_the_frontend_too(site: Site) -> None:
    with pytest.raises(guard.GuardError, match=f"jaxlib is not installed; {CONSUMER} needs") as info:
        extension_check(site)
    assert info.value.fix == FIX


def test_custom_header_location(site: Site) -> None:
    site.jaxlib("0.10.2", ffi=(0, 1))
    site.write("jaxlib/headers/c_api.h", C_API_H.format(major=0, minor=3))
    assert extension_check(site, ffi_header="headers/c_api.h") == "0.10.2"
    with pytest.raises(guard.GuardError, match="XLA FFI API 0.1"):
        extension_check(site)


def test_skip_variable_skips_the_check(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.jaxlib("0.9.0", ffi=(0, 2))
    monkeypatch.setenv(guard.SKIP_ENV, "1")
    assert extension_check(site) is None
    monkeypatch.setenv(guard.SKIP_ENV, "0")
    with pytest.raises(guard.GuardError):
        extension_check(site)
