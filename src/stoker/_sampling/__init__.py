"""Stage 2 of the data path: the order in which records are read in an epoch."""
