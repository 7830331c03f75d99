"""jaxrel: release engineering for split-wheel Python projects."""

__version__ = "0.1.0.dev0"
