"""Token packing: variable-length documents packed into fixed rows for a language model.

Run it with ``python examples/token_packing.py``. Documents of 3 to 40 tokens are
packed first-fit into rows of 64 tokens by ``sk.pack``. Each row comes with
``segment_ids`` (1, 2, ... per document in the row, 0 for padding) and ``positions``
(the index of each token within its document), which is what an attention mask that
keeps documents apart, and the position embeddings, need.

Packing wastes far less compute than padding every document to the longest one; the
script prints both fill rates. Like every stoker stage, the packed batches are the
same in every worker mode and resume exactly from a saved state, checked at the end.
"""

from __future__ import annotations

import json

import numpy as np

import stoker as sk
from stoker.testing import assert_resumes_exactly

LENGTH = 64  # tokens per packed row
VOCAB = 1_000


def documents(count: int = 400) -> sk.Dataset:
    """``count`` documents of random token ids (int32), 3 to 40 tokens each."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 41, count)
    return sk.from_sequence(
        [{"tokens": rng.integers(1, VOCAB, n, dtype=np.int32)} for n in lengths]
    )


def main() -> None:
    docs = documents()
    packed = sk.pack(docs, length=LENGTH)  # fields=("tokens",) by default
    loader = sk.DataLoader(packed, batch_size=8, shuffle=True, seed=0)

    batch = next(iter(loader))
    tokens, segments, positions = batch["tokens"], batch["segment_ids"], batch["positions"]
    print("one batch:", {name: array.shape for name, array in batch.items()})
    row = 0
    print("row 0 segment ids:", segments[row].tolist())
    print("row 0 positions:  ", positions[row].tolist())

    # Document k of a row is where segment_ids == k; its positions count from 0.
    for k in range(1, int(segments[row].max()) + 1):
        where = segments[row] == k
        assert positions[row][where].tolist() == list(range(int(where.sum())))
    assert (tokens[segments == 0] == 0).all()  # padding is 0

    # How much of each row is real tokens, packed vs padded to the longest document.
    real = sum(len(doc["tokens"]) for doc in docs)
    rows = sum(len(b["tokens"]) for b in loader)
    longest = max(len(doc["tokens"]) for doc in docs)
    print(f"packed: {real / (rows * LENGTH):.0%} of the tokens are real ({rows} rows)")
    print(f"padded to the longest document: {real / (len(docs) * longest):.0%}")

    # Packing keeps stoker's guarantees: the state is a few integers, and a resume
    # yields exactly the rows the uninterrupted run yields.
    it = iter(loader)
    next(it)
    print("state after one batch:", json.dumps(it.state_dict())[:100], "...")
    assert_resumes_exactly(sk.DataLoader(packed, batch_size=8, shuffle=True, seed=0), epochs=1)
    print("resume checked after every batch")


if __name__ == "__main__":
    main()
