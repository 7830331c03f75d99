"""Every spelling of the API number: an alias, the old name, module attributes, the raw variable."""

import jax._src.lib
from jax._src import lib
from jax._src.lib import jaxlib_extension_version as api_version
from jax._src.lib import xla_client, xla_extension_version

hits = 0
if api_version >= 470:
    hits += 1
if xla_extension_version >= 470:
    hits += 1
if lib.jaxlib_extension_version >= 470:
    hits += 1
if jax._src.lib.xla_extension_version >= 470:
    hits += 1
if xla_client._version >= 470:
    hits += 1
