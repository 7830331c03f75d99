"""splitfam-cpu-plugin: names the platform it serves."""

from splitfam_cpu_plugin.version import __version__

__all__ = ["__version__", "platform"]


def platform() -> str:
    """The platform this plugin provides."""
    return "cpu"
