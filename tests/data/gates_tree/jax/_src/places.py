"""Where a gate can stand: if, elif, a ternary, assert, while, a plain expression."""

from jax._src.lib import jaxlib_extension_version


def new() -> int:
    return 1


def old() -> int:
    return 0


if jaxlib_extension_version >= 600:
    path = "head"
elif jaxlib_extension_version >= 470:
    path = "new"
else:
    path = "old"
result = new() if jaxlib_extension_version > 505 else old()
assert jaxlib_extension_version >= 300, "jaxlib too old"
while jaxlib_extension_version < 300:
    break
x = jaxlib_extension_version >= 100
if (jaxlib_extension_version >= 470
        and x):
    path = "both"
