"""All six comparison operators, with the API number on either side."""

from jax._src.lib import jaxlib_extension_version

hits = 0
if jaxlib_extension_version >= 300:
    hits += 1
if 300 <= jaxlib_extension_version:
    hits += 1
if jaxlib_extension_version > 470:
    hits += 1
if 470 < jaxlib_extension_version:
    hits += 1
if jaxlib_extension_version < 300:
    hits += 1
if 300 > jaxlib_extension_version:
    hits += 1
if jaxlib_extension_version <= 600:
    hits += 1
if 600 >= jaxlib_extension_version:
    hits += 1
if jaxlib_extension_version == 300:
    hits += 1
if 477 == jaxlib_extension_version:
    hits += 1
if jaxlib_extension_version != 600:
    hits += 1
if 300 != jaxlib_extension_version:
    hits += 1
