"""Gates the judge cannot decide, and look-alikes that are no gates at all."""

from typing import TYPE_CHECKING

from jax._src import lib
from jax._src.lib import jaxlib_extension_version as v
from jax._src.lib import xla_client

MINIMUM = 452
flag = False
my_jaxlib_extension_version_count = 4
message = "needs jaxlib_extension_version >= 470"
hits = 0
if lib.ifrt_version >= 10:
    hits += 1
if TYPE_CHECKING or v >= 300:
    hits += 1
if TYPE_CHECKING or v >= 470:
    hits += 1
if flag and v >= 300:
    hits += 1
if flag and v >= 600:
    hits += 1
if v >= MINIMUM:
    hits += 1
if my_jaxlib_extension_version_count >= 3:
    hits += 1
if lib._version > 2:
    hits += 1
if xla_client._ifrt_version >= 10:
    hits += 1
if "jaxlib_extension_version >= 470" in message:
    hits += 1
