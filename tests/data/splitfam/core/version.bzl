"""splitfam-core's version, as Bazel stamps it into the wheel (keep equal to splitfam_core/version.py)."""

VERSION = "0.1.0"
