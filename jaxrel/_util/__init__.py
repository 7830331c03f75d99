"""Private helpers shared across jaxrel: atomic writes, literal reading, text tables, output tails."""
