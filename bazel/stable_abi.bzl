"""The ABI the extension's modules are built for: CPython's stable ABI (PEP 384, `abi3`) with the GIL, one wheel per
machine and component serving every CPython from FLOOR on (pip installs a `cp311-abi3` wheel on 3.11, 3.12, 3.13 and
newer); a free-threaded CPython's own ABI (`cp313t`) without it, one wheel per free-threaded Python.

The modules use only the limited API (a dict of capsules, strings, a tuple: rmsnorm/cc/module.cc), so nothing is
lost; what is gained is a release grid without a Python axis for the GIL builds, which is what lets the aarch64
wheels be built from the one aarch64 CPython this machine's Debian offers (3.11) for every Python jax supports.
A free-threaded CPython (3.13t) has no stable ABI yet (PEP 803 proposes one for 3.15): its wheel is built for that
Python's own ABI, with the headers' `Py_GIL_DISABLED` (pyconfig.h sets it) and no `Py_LIMITED_API`.
"""

# The oldest CPython the wheels serve: jax's own floor for the releases the extension supports.
FLOOR = (3, 11)

_HEX = "0123456789ABCDEF"

def _hex2(number):
    return _HEX[number // 16] + _HEX[number % 16]

def module_abi(python_version, abi_tag, ext_suffix):
    """The wheel facts of a module built with the headers of CPython `python_version` ("3.12", of `@local_python`,
    whose ABI tag is `abi_tag` and module suffix `ext_suffix`): its tags, module suffix, Requires-Python and
    defines. With the GIL: the limited API of FLOOR (`cp311-abi3`, `.abi3.so`). Free-threaded (`cp313t`): that
    Python's own tags and suffix. Fails, naming the fix, for a CPython older than FLOOR."""
    major, minor = [int(part) for part in python_version.split(".")[:2]]
    floor = "%d.%d" % FLOOR
    if (major, minor) < FLOOR:
        fail(("the extension is built for CPython %s and newer; CPython %s is older. Fix: build " +
              "with Python %s or newer (--python, or PYTHON_BIN_PATH).") % (floor, python_version, floor))
    if abi_tag.endswith("t"):
        return struct(
            python_tag = "cp%d%d" % (major, minor),
            abi_tag = abi_tag,
            ext_suffix = ext_suffix,
            requires_python = "==%d.%d.*" % (major, minor),
            defines = [],
            free_threaded = True,
        )
    return struct(
        python_tag = "cp%d%d" % FLOOR,
        abi_tag = "abi3",
        ext_suffix = ".abi3.so",
        requires_python = ">=" + floor,
        defines = ["Py_LIMITED_API=0x%s%s0000" % (_hex2(FLOOR[0]), _hex2(FLOOR[1]))],
        free_threaded = False,
    )
