"""Rules that assemble a platform wheel from Bazel outputs, reproducibly.

`py_wheel_file` writes a wheel (PEP 427) named `{distribution}-{version}-{tags}.whl`:
METADATA (core metadata 2.1), WHEEL, and a RECORD with the sha256 and size of every file.
The archive is reproducible: members in a fixed order, fixed timestamps (1980-01-01) and
permissions, so two clean builds give the same bytes. It needs a Python 3 interpreter path
(e.g. `PYTHON` from `@local_python//:defs.bzl`) to run `bazel/wheel_builder.py` (standard
library only).

`py_constants` writes a small Python module of string constants, for stamping build facts
(the version, the XLA pin) into a package.
"""

def _wheel_name(ctx):
    distribution = ctx.attr.distribution.replace("-", "_").replace(".", "_")
    tags = "-".join([ctx.attr.python_tag, ctx.attr.abi_tag, ctx.attr.platform_tag])
    return "%s-%s-%s.whl" % (distribution, ctx.attr.version, tags)

def _package_path(file, strip_prefix):
    path = file.short_path
    if strip_prefix and path.startswith(strip_prefix + "/"):
        return path[len(strip_prefix) + 1:]
    fail("%s is not under strip_prefix %r" % (path, strip_prefix))

def _py_wheel_file_impl(ctx):
    out = ctx.actions.declare_file(_wheel_name(ctx))
    args = ctx.actions.args()
    args.add("--out", out)
    args.add("--name", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--tag", "-".join([ctx.attr.python_tag, ctx.attr.abi_tag, ctx.attr.platform_tag]))
    args.add("--summary", ctx.attr.summary)
    if ctx.attr.license:
        args.add("--license", ctx.attr.license)
    if ctx.attr.requires_python:
        args.add("--requires-python", ctx.attr.requires_python)
    args.add_all(ctx.attr.requires, before_each = "--requires")
    inputs = []
    if ctx.file.description_file:
        args.add("--description", ctx.file.description_file)
        inputs.append(ctx.file.description_file)
    for src in ctx.files.srcs:
        args.add("--file", "%s=%s" % (src.path, _package_path(src, ctx.attr.strip_prefix)))
        inputs.append(src)
    for target, destination in ctx.attr.files.items():
        for src in target.files.to_list():
            args.add("--file", "%s=%s" % (src.path, destination))
            inputs.append(src)
    ctx.actions.run(
        executable = ctx.attr.python,
        arguments = [ctx.file._builder.path, args],
        inputs = inputs + [ctx.file._builder],
        outputs = [out],
        mnemonic = "PyWheel",
        progress_message = "Assembling wheel %s" % out.basename,
    )
    return [DefaultInfo(files = depset([out]))]

py_wheel_file = rule(
    implementation = _py_wheel_file_impl,
    attrs = {
        "distribution": attr.string(mandatory = True, doc = "Distribution name, e.g. `jaxrel-rmsnorm`."),
        "version": attr.string(mandatory = True, doc = "PEP 440 version (stamp it from one source)."),
        "python_tag": attr.string(mandatory = True, doc = "e.g. `cp311` (`PYTHON_TAG` of @local_python)."),
        "abi_tag": attr.string(mandatory = True, doc = "e.g. `cp311` (`ABI_TAG` of @local_python)."),
        "platform_tag": attr.string(mandatory = True, doc = "e.g. `manylinux_2_17_x86_64`."),
        "summary": attr.string(mandatory = True),
        "license": attr.string(),
        "requires_python": attr.string(),
        "requires": attr.string_list(doc = "Requires-Dist lines, in order."),
        "description_file": attr.label(allow_single_file = [".md"], doc = "Markdown long description."),
        "srcs": attr.label_list(allow_files = True, doc = "Files placed at their path minus strip_prefix."),
        "strip_prefix": attr.string(doc = "Workspace-relative directory that srcs are placed relative to."),
        "files": attr.label_keyed_string_dict(allow_files = True, doc = "File → path inside the wheel."),
        "python": attr.string(mandatory = True, doc = "Absolute path of a Python 3 to run the builder."),
        "_builder": attr.label(default = Label("//bazel:wheel_builder.py"), allow_single_file = True),
    },
    doc = "A reproducible platform wheel (see the module docstring).",
)

def _py_constants_impl(ctx):
    lines = ['"""Build facts stamped by Bazel (py_constants); do not edit."""', ""]
    for key in sorted(ctx.attr.values):
        lines.append("%s = %r" % (key, ctx.attr.values[key]))
    ctx.actions.write(ctx.outputs.out, "\n".join(lines) + "\n")

py_constants = rule(
    implementation = _py_constants_impl,
    attrs = {
        "values": attr.string_dict(mandatory = True, doc = "NAME → string value."),
        "out": attr.output(mandatory = True, doc = "The .py file to write."),
    },
    doc = "A Python module of string constants (see the module docstring).",
)
