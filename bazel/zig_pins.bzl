"""The hermetic C++ compiler the portable extension wheels are built with: Zig's clang, from the `ziglang`
wheel, pinned by file name and sha256 like NVIDIA's wheels (bazel/cuda_pins.bzl).

`zig c++ -target <arch>-linux-gnu.<glibc>` compiles against the headers of that glibc and links against stubs
of its symbol versions, so the object needs no newer glibc than GLIBC; it links Zig's libc++ statically, so it
needs no libstdc++ at all (no `GLIBCXX_*`/`CXXABI_*` symbol). GLIBC is jaxlib's own floor (its wheels are
`manylinux_2_27`): an extension built so installs wherever jaxlib installs.
"""

ZIG = struct(
    version = "0.17.0",
    wheel = "ziglang-0.17.0-py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64.whl",
    sha256 = "97079827064a7492cce5541ceb438ae8003ce1e54e399676da2d62fb7a5dc08b",
)

GLIBC = "2.27"

# Bazel CPU name → Zig's target (aarch64: --config=manylinux_aarch64 with an aarch64 Python, scripts/aarch64_python.sh)
TARGETS = {
    "k8": "x86_64-linux-gnu",
    "aarch64": "aarch64-linux-gnu",
}
