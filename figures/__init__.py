"""One module per figure: (records, table, out) -> PNG and SVG files; figures read tables and records, never analysis."""
