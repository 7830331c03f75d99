"""Run a frontend against every released backend it admits: index, wheels, environments, matrix, cells, report."""
