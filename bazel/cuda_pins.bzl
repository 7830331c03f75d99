"""The CUDA toolkits extension wheels are built with: NVIDIA's wheels, pinned by file name and sha256.

WORKSPACE hands `wheels` to `cuda_toolkit`; BUILD files read the facts without fetching anything (a BUILD
file that loaded `@cuda13//:defs.bzl` would fetch the toolkit whenever its package is loaded, `//...`
included). `version` is the toolkit's MAJOR.MINOR (nvcc's "release 13.0"; the fetch refuses wheels that
disagree): the oldest CUDA runtime and driver an object compiled by it needs, by CUDA's minor-version
compatibility. The pins are the 13.0 toolkit, the release the jax-cuda13-plugin's `with-cuda` extra floors
(`nvidia-cuda-nvcc>=13.0.48`, `nvidia-cuda-runtime>=13.0.48`) and the one driver r580 runs natively.
"""

CUDA13 = struct(
    major = 13,
    version = "13.0",
    wheels = {
        "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": "56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03",
        "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": "2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4",
        "nvidia_nvvm-13.0.88-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl": "c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0",
        "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": "7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548",
    },
)

# Machine code (SASS) for Ampere (sm_80), Hopper (sm_90), Blackwell (sm_100, sm_120); PTX for the newest,
# which the driver JIT-compiles for GPUs newer still.
CUDA_SASS = ["80", "90", "100", "120"]
CUDA_PTX = ["120"]

# CUDA 12 for the `jaxrel-rmsnorm-cuda12` wheel. NVIDIA's CUDA 12 wheels ship ptxas, libdevice and the headers
# but no nvcc (and no fatbinary): the front end is clang (Zig's, the pinned ziglang wheel), with
# `--cuda-path` pointing at a tree put together from these pieces, each (wheel, sha256, from, to):
#   - CUDA 12.1 (what jax-cuda12-plugin's `with-cuda` extra floors, nvidia-cuda-runtime-cu12>=12.1.105):
#     ptxas, libdevice and the crt headers (nvcc), the runtime headers and libcudart.so.12 (runtime), and
#     curand's headers, which clang's CUDA wrapper includes whatever the source uses;
#   - <nv/target> (macros only) from CCCL 12.9: curand's header includes it, and the 12.1 CCCL wheel lacks it;
#   - fatbinary from the CUDA 13 nvcc wheel pinned above: it bundles the 12.1 ptxas's cubins and clang's PTX in
#     the fat binary container every CUDA runtime reads;
#   - clang's own CUDA headers (`__clang_cuda_runtime_wrapper.h` …), which Zig leaves out of its clang, from
#     the clang-tidy wheel of the same clang release (22.1.8).
_NVCC13 = "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"

CUDA12 = struct(
    major = 12,
    version = "12.1",
    clang_version = "22",
    pieces = [
        ("nvidia_cuda_nvcc_cu12-12.1.105-py3-none-manylinux1_x86_64.whl", "a0712a05ffd57d9f017580ffcc808b207f7f4ef7a5ca8ac1312318b153739a18", "nvidia/cuda_nvcc/bin/ptxas", "bin/ptxas"),
        ("nvidia_cuda_nvcc_cu12-12.1.105-py3-none-manylinux1_x86_64.whl", "a0712a05ffd57d9f017580ffcc808b207f7f4ef7a5ca8ac1312318b153739a18", "nvidia/cuda_nvcc/nvvm/libdevice/", "nvvm/libdevice"),
        ("nvidia_cuda_nvcc_cu12-12.1.105-py3-none-manylinux1_x86_64.whl", "a0712a05ffd57d9f017580ffcc808b207f7f4ef7a5ca8ac1312318b153739a18", "nvidia/cuda_nvcc/include/", "include"),
        ("nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl", "6e258468ddf5796e25f1dc591a31029fa317d97a0a94ed93468fc86301d61e40", "nvidia/cuda_runtime/include/", "include"),
        ("nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl", "6e258468ddf5796e25f1dc591a31029fa317d97a0a94ed93468fc86301d61e40", "nvidia/cuda_runtime/lib/libcudart.so.12", "lib/libcudart.so.12"),
        ("nvidia_curand_cu12-10.3.2.106-py3-none-manylinux1_x86_64.whl", "9d264c5036dde4e64f1de8c50ae753237c12e0b1348738169cd0f8a536c0e1e0", "nvidia/curand/include/", "include"),
        ("nvidia_cuda_cccl_cu12-12.9.27-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "37869e17ce2e1ecec6eddf1927cca0f8c34e64fd848d40453df559091e2d7117", "nvidia/cuda_cccl/include/nv/", "include/nv"),
        (_NVCC13, CUDA13.wheels[_NVCC13], "nvidia/cu13/bin/fatbinary", "bin/fatbinary"),
        ("clang_tidy-22.1.8-py2.py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", "1a3de07ba82d4403d8b692ae63a5520d4db5c606014c92c24bbcef9259057bf1", "clang_tidy/data/lib/clang/22/include/", "clang/include"),
    ],
)

# The aarch64 CUDA 12 wheel links the aarch64 libcudart (found at run time in NVIDIA's aarch64 runtime wheel, as
# on x86_64); the headers, ptxas and libdevice above serve both machines (they run here). NVIDIA's first aarch64
# runtime wheel for CUDA 12 is 12.3.101: only its libcudart.so.12 (the soname, the symbols) is linked against.
CUDA12_AARCH64 = struct(
    major = 12,
    version = "12.3",
    pieces = [
        ("nvidia_cuda_runtime_cu12-12.3.101-py3-none-manylinux2014_aarch64.whl", "fbbfb8f2b933cfbd33461cc5401cbeafb8b0a05cc18ec8070c10352c9b1b0d57", "nvidia/cuda_runtime/lib/libcudart.so.12", "lib/libcudart.so.12"),
    ],
)

# CUDA 13 for aarch64, compiled by clang as CUDA 12 is: nvcc's host side needs a host compiler for aarch64 with a
# libstdc++ its front end (cudafe++) parses, and Zig's libc++ is not one (measured: cudafe++ rejects it), so the
# kernels of the aarch64 wheel are clang's, the x86_64 wheel's nvcc's. The tree for clang's --cuda-path, from the
# CUDA 13.0 wheels above (ptxas, fatbinary, libdevice, the crt and runtime headers), the curand and cccl headers
# of CUDA 13.0 that clang's CUDA wrapper includes, clang's own CUDA headers, and NVIDIA's aarch64 libcudart.so.13.
_CRT13 = "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
_NVVM13 = "nvidia_nvvm-13.0.88-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
_RUNTIME13 = "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
CUDA13_AARCH64 = struct(
    major = 13,
    version = "13.0",
    pieces = [
        (_NVCC13, CUDA13.wheels[_NVCC13], "nvidia/cu13/bin/ptxas", "bin/ptxas"),
        (_NVCC13, CUDA13.wheels[_NVCC13], "nvidia/cu13/bin/fatbinary", "bin/fatbinary"),
        (_NVCC13, CUDA13.wheels[_NVCC13], "nvidia/cu13/include/", "include"),
        (_CRT13, CUDA13.wheels[_CRT13], "nvidia/cu13/include/", "include"),
        (_NVVM13, CUDA13.wheels[_NVVM13], "nvidia/cu13/nvvm/libdevice/", "nvvm/libdevice"),
        (_RUNTIME13, CUDA13.wheels[_RUNTIME13], "nvidia/cu13/include/", "include"),
        ("nvidia_curand-10.4.0.35-py3-none-manylinux_2_27_x86_64.whl", "1aee33a5da6e1db083fe2b90082def8915f30f3248d5896bcec36a579d941bfc", "nvidia/cu13/include/", "include"),
        ("nvidia_cuda_cccl-13.0.85-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649", "nvidia/cu13/include/cccl/nv/", "include/nv"),
        ("clang_tidy-22.1.8-py2.py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", "1a3de07ba82d4403d8b692ae63a5520d4db5c606014c92c24bbcef9259057bf1", "clang_tidy/data/lib/clang/22/include/", "clang/include"),
        ("nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl", "ef9bcbe90493a2b9d810e43d249adb3d02e98dd30200d86607d8d02687c43f55", "nvidia/cu13/lib/libcudart.so.13", "lib/libcudart.so.13"),
    ],
)

# CUDA 12.1 knows architectures up to Hopper: SASS for Ampere and Hopper, PTX for Hopper (newer GPUs JIT it)
CUDA12_SASS = ["80", "90"]
CUDA12_PTX = ["90"]
