"""`cuda_wheel`: the CUDA companion wheel of jaxrel-rmsnorm for one CUDA major (one wheel per major, as jax ships
its CUDA plugins), from an object of compiled kernels (`cuda_objects`: nvcc; `clang_cuda_objects`: clang).

It makes `_rmsnorm_cuda<MAJOR>.so` (the kernels linked with the CUDA FFI handlers and the module's C entry
points; libcudart linked, never bundled, found at run time by rpath in `runtime_dir` of site-packages, where
NVIDIA's runtime wheel puts it, as jax's CUDA plugins find theirs), its build facts, and
`wheel_cuda<MAJOR>`: `jaxrel-rmsnorm-cuda<MAJOR>`, requiring the CPU wheel of the same version, the jax CUDA
plugin of that major and `runtime_requirement`. Every target is manual: `bazel build //...` fetches no CUDA.
"""

load("//bazel:wheel.bzl", "py_constants", "py_wheel_file")

def by_machine(x86_64, aarch64):
    """`x86_64`, or `aarch64` when building for aarch64 (`--cpu=aarch64`: `--config=manylinux_aarch64`)."""
    return select({"//bazel:aarch64": aarch64, "//conditions:default": x86_64})

def cuda_wheel(cuda, kernels, cudart, runtime_dir, runtime_requirement, sass, ptx, facts, platform_tag):
    """One CUDA major's wheel; `cudart`: the libcudart to link, `{"x86_64": label, "aarch64": label}` (one for
    each machine, NVIDIA's runtime wheel of that machine); `facts`: DISTRIBUTION (the CPU wheel's), VERSION,
    BACKEND, FFI_API, MINIMUM_BACKEND, XLA_COMMIT, ABI (the module ABI's facts, bazel/stable_abi.bzl) and PYTHON
    (the local Python, which runs the wheel builder)."""
    major = cuda.major
    native.alias(
        name = "cudart%d" % major,
        actual = by_machine(cudart["x86_64"], cudart["aarch64"]),
        tags = ["manual"],
    )
    cudart = ":cudart%d" % major
    distribution = "%s-cuda%d" % (facts["DISTRIBUTION"], major)
    package = distribution.replace("-", "_")
    native.cc_binary(
        name = "_rmsnorm_cuda%d.so" % major,
        srcs = ["cc/module.cc", kernels],
        additional_linker_inputs = [cudart],
        copts = ["-fvisibility=hidden", "-DJAXREL_RMSNORM_CUDA"],
        defines = facts["ABI"].defines,
        linkopts = ["$(location %s)" % cudart, "-Wl,-rpath,$$ORIGIN/../" + runtime_dir],
        linkshared = True,
        tags = ["manual"],
        deps = [":handlers_cuda", "@local_python//:headers"],
    )
    py_constants(
        name = "build_info_cuda%d" % major,
        out = "_build_info_cuda%d.py" % major,
        values = {
            "DISTRIBUTION": distribution,
            "VERSION": facts["VERSION"],
            "BACKEND": facts["BACKEND"],
            "FFI_API": facts["FFI_API"],
            "MINIMUM_BACKEND": facts["MINIMUM_BACKEND"],
            "XLA_COMMIT": facts["XLA_COMMIT"],
            "CUDA_MAJOR": str(major),
            "CUDA_VERSION": cuda.version,
            "CUDA_ARCHITECTURES": ",".join(["sm_" + a for a in sass] + ["compute_" + a for a in ptx]),
        },
    )
    py_wheel_file(
        name = "wheel_cuda%d" % major,
        abi_tag = facts["ABI"].abi_tag,
        description_file = "README.md",
        distribution = distribution,
        files = {
            ":_rmsnorm_cuda%d.so" % major: package + "/_rmsnorm_cuda" + facts["ABI"].ext_suffix,
            ":build_info_cuda%d" % major: package + "/_build_info.py",
            "//jaxrel:guard.py": package + "/_guard.py",
            "cuda/__init__.py": package + "/__init__.py",
        },
        license = "Apache-2.0",
        platform_tag = platform_tag,
        python = facts["PYTHON"],
        python_tag = facts["ABI"].python_tag,
        requires = [
            facts["DISTRIBUTION"] + "==" + facts["VERSION"],
            "jax-cuda%d-plugin>=%s" % (major, facts["MINIMUM_BACKEND"]),
            runtime_requirement,
        ],
        requires_python = facts["ABI"].requires_python,
        summary = "CUDA %d kernels for jaxrel-rmsnorm, guarded at import against a mismatched CUDA plugin or driver" %
                  major,
        tags = ["manual"],
        version = facts["VERSION"],
    )
