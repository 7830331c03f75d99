"""The compat history: every run's results kept in one store, their meaning night over night, answers about sets
of wheels, and the HUD (see docs/history.md)."""
