"""Libraries built on the family: their true minimum frontend, and a Crater of a frontend built from source."""

__all__: list[str] = []
