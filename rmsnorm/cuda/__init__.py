"""CUDA kernels for ``jaxrel_rmsnorm`` (one wheel per CUDA major, as jax ships its CUDA plugins).

Importing ``jaxrel_rmsnorm`` finds this package and registers its handlers for the ``CUDA`` platform; it
is not meant to be imported on its own. Its import runs the vendored guard twice: the jaxlib side (the
XLA FFI API these handlers were compiled against) and the device side (``_guard.check_cuda``: the jax
CUDA plugin's CUDA major, the CUDA runtime from the ``nvidia-cuda-runtime`` wheel, the NVIDIA driver),
so a mismatch is one ImportError with its fix instead of a launch failure or a crash later.
"""

import importlib

from . import _build_info, _guard

_guard.check(
    backend=_build_info.BACKEND,
    minimum_backend=_build_info.MINIMUM_BACKEND,
    minimum_ffi_api=_build_info.FFI_API,
    consumer=f"{_build_info.DISTRIBUTION} {_build_info.VERSION}",
    install_with=("jax",),
)

_native = None


def _load() -> int:
    """Import the compiled module (it loads libcudart); the CUDA runtime version loaded (13000 = 13.0)."""
    global _native
    _native = importlib.import_module(f"{__name__}._rmsnorm_cuda")
    return int(_native.cuda_runtime()[1])


#: Why the kernels would sit idle here (no GPU driver, no jax CUDA plugin), or None: they can run.
idle_reason = _guard.check_cuda(
    cuda_major=_build_info.CUDA_MAJOR,
    cuda_version=_build_info.CUDA_VERSION,
    distribution=_build_info.DISTRIBUTION,
    version=_build_info.VERSION,
    load=_load,
)
assert _native is not None  # check_cuda loads it on every path that returns (JAXREL_SKIP_GUARD=1 too)

PLATFORM = _native.platform()  # "CUDA"
CUDA_MAJOR = int(_build_info.CUDA_MAJOR)
ARCHITECTURES = tuple(_build_info.CUDA_ARCHITECTURES.split(","))


def handlers() -> dict:
    """FFI target name → handler capsule, for ``jax.ffi.register_ffi_target(..., platform=PLATFORM)``."""
    return dict(_native.handlers())
