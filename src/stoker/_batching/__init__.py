"""Stage 4 of the data path: collate records into batches, in planned, recycled buffers."""
