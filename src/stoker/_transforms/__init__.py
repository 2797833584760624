"""Stage 3 of the data path: lazy record operations, one small class per file."""
