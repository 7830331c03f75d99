"""The CPython stable ABI the extension's modules are built for (PEP 384, `abi3`): one wheel per machine and
component serves every CPython from FLOOR on, as pip installs a `cp311-abi3` wheel on 3.11, 3.12, 3.13 and newer.

The modules use only the limited API (a dict of capsules, strings, a tuple: rmsnorm/cc/module.cc), so nothing is
lost; what is gained is a release grid without a Python axis, which is what lets the aarch64 wheels be built from
the one aarch64 CPython this machine's Debian offers (3.11) for every Python jax supports. A free-threaded CPython
(3.13t) has no stable ABI yet: building for one is refused.
"""

# The oldest CPython the wheels serve: jax's own floor for the releases the extension supports.
FLOOR = (3, 11)

_HEX = "0123456789ABCDEF"

def _hex2(number):
    return _HEX[number // 16] + _HEX[number % 16]

def stable_abi(python_version, abi_tag):
    """The wheel facts of a module built against the limited API of FLOOR with the headers of CPython
    `python_version` ("3.12", of `@local_python`): its tags, module suffix, Requires-Python and the
    `Py_LIMITED_API` define. Fails, naming the fix, for a CPython older than FLOOR or a free-threaded one."""
    major, minor = [int(part) for part in python_version.split(".")[:2]]
    floor = "%d.%d" % FLOOR
    if (major, minor) < FLOOR:
        fail(("the extension is built for the stable ABI of CPython %s and newer; CPython %s is older. Fix: build " +
              "with Python %s or newer (--python, or PYTHON_BIN_PATH).") % (floor, python_version, floor))
    if abi_tag.endswith("t"):
        fail(("CPython %s here is free-threaded (%s), which has no stable ABI. Fix: build with a CPython with the " +
              "GIL (--python).") % (python_version, abi_tag))
    return struct(
        python_tag = "cp%d%d" % FLOOR,
        abi_tag = "abi3",
        ext_suffix = ".abi3.so",
        requires_python = ">=" + floor,
        define = "Py_LIMITED_API=0x%s%s0000" % (_hex2(FLOOR[0]), _hex2(FLOOR[1])),
    )
