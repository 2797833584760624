"""Reading a stream cursor to its end, keeping the JSON state after every record."""

import json


def read_with_states(ds, ctx):
    """Every record of ``ds`` opened at ``ctx``, and the state before each one and at the end."""
    cursor = ds._open(ctx, None)
    records, states = [], [json.loads(json.dumps(cursor.state_dict()))]
    while True:
        try:
            records.append(next(cursor))
        except StopIteration:
            return records, states
        states.append(json.loads(json.dumps(cursor.state_dict())))
