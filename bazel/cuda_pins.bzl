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
