"""Distributions, below every feature: where they come from, what they declare, where they run.

The index client (PEP 503/691 listings, verified downloads), wheels and sdists (METADATA,
RECORD, tags, API numbers), file names, pip's configuration translated for uv, interpreters on
this machine, fresh environments, plugin families from a frontend's extras, out-of-tree exports
of a source checkout, and the Bazel driver. ``compat``, ``release``, ``gates`` and
``extension`` import from here; nothing here imports a feature.
"""
