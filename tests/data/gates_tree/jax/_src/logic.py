"""Comparisons inside and/or/not, and chained comparisons."""

from jax._src.lib import jaxlib_extension_version as v

ok = True
hits = 0
if v >= 470 and v < 500:
    hits += 1
if v < 300 or v >= 600:
    hits += 1
if not v >= 470:
    hits += 1
if v >= 300 or not ok:
    hits += 1
if 300 <= v < 600:
    hits += 1
if 460 <= v < 500:
    hits += 1
