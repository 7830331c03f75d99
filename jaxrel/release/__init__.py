"""Release scripts: plan, check, bump, build, verify and publish a split-wheel family.

One module per step, over one :class:`~jaxrel.release.project.Project` (the family, its
``[tool.jaxrel.release]`` components and the source tree). The order in which CI runs them
is the order of the steps; ``publish`` refuses anything ``verify`` would refuse.
"""
