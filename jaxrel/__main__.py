"""``python -m jaxrel``: the same command as the ``jaxrel`` script."""

from jaxrel._entry import main

main()
