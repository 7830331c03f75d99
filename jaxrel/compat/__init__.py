"""``jaxrel compat``: the frontend against every released backend it admits, cell by cell, then triage and reports.

The cells themselves (matrix, environments, the in-cell driver, suites) are :mod:`jaxrel.cells`,
shared with the atlas and bisect; this package is the run: :mod:`~jaxrel.compat.options`,
one :mod:`~jaxrel.compat.cell`, the whole :mod:`~jaxrel.compat.run`, :mod:`~jaxrel.compat.triage`
and the :mod:`~jaxrel.compat.report`.
"""
