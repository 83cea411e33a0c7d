"""Table services that run around a table's commits."""
