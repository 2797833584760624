"""Stage 1 of the data path: sources that turn an index (or a stream position) into a record."""
