"""A split-wheel family: the model, the built-in profiles, and the ``[tool.jaxrel]`` reader.

``from jaxrel.family import Family, resolve_family`` is the public way in; the parts live in
:mod:`~jaxrel.family.model`, :mod:`~jaxrel.family.profiles` and :mod:`~jaxrel.family.config`.
"""

from jaxrel.family.config import family_from_config, jaxrel_table, load_family, resolve_family
from jaxrel.family.model import ApiNumber, Backend, ConfigError, Family, Frontend, Package, PinSet, PluginSpec
from jaxrel.family.profiles import PROFILES, jax_profile

__all__ = [
    "PROFILES", "ApiNumber", "Backend", "ConfigError", "Family", "Frontend", "Package", "PinSet", "PluginSpec",
    "family_from_config", "jax_profile", "jaxrel_table", "load_family", "resolve_family",
]
