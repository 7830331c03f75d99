"""jax.ffi: the public home of the XLA FFI helpers (``ffi_call``, ``include_dir``, ...).

Measured from the jax wheels: ``jax/ffi.py`` is absent from 0.4.38 and present from 0.5.0. The
older ``jax.extend.ffi`` does not count: its ``ffi_call`` (from 0.4.31, with another calling
convention before 0.4.36) was deprecated in 0.5.0 and works up to 0.6.2; from 0.7.0 the module is
still importable but ``jax.extend.ffi.ffi_call`` raises ``AttributeError`` ("removed in JAX
v0.7.0"), and the module is gone from 0.8.0 (``test_api[jax.extend.ffi.ffi_call]`` measures it).
The header belongs to jaxlib: ``c_api.h`` declaring the FFI API version
is in every jaxlib wheel from 0.4.29 (jaxlib_extension_version 270; jaxlib 0.4.28, 262, has none).
"""

from __future__ import annotations

import os
import re

import jax
import numpy as np
import pytest

FEATURE = "jax.ffi (the older jax.extend.ffi, deprecated in 0.5.0 and removed in 0.7.0, does not count)"
pytestmark = pytest.mark.needs(FEATURE, jax="0.5.0")


def test_jax_ffi_exports_the_public_helpers():
    from jax import ffi

    for name in ("ffi_call", "ffi_lowering", "include_dir", "pycapsule", "register_ffi_target"):
        assert callable(getattr(ffi, name)), name


@pytest.mark.needs("the XLA FFI header in jaxlib", jaxlib_extension_version=270)
def test_include_dir_holds_the_ffi_header_with_its_api_version():
    from jax import ffi

    header = os.path.join(ffi.include_dir(), "xla", "ffi", "api", "c_api.h")
    assert os.path.isfile(header), header
    with open(header, encoding="utf-8") as handle:
        text = handle.read()
    for part in ("MAJOR", "MINOR"):
        assert re.search(rf"#define\s+XLA_FFI_API_{part}\s+\d+", text), f"{header} declares no XLA_FFI_API_{part}"


def test_ffi_call_lowers_to_a_custom_call_that_the_backend_looks_up():
    from jax import ffi

    call = jax.jit(ffi.ffi_call("compat_no_such_target", jax.ShapeDtypeStruct((2,), np.float32)))
    x = np.ones(2, np.float32)
    assert "stablehlo.custom_call @compat_no_such_target" in call.lower(x).as_text()
    # The backend's FFI registry answers: no handler by that name (measured message:
    # "No FFI handler registered for compat_no_such_target on a platform Host").
    with pytest.raises(Exception, match="compat_no_such_target"):
        jax.block_until_ready(call(x))
