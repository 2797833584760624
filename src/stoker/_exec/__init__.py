"""Stage 5 of the data path: the only code that starts threads or processes."""
