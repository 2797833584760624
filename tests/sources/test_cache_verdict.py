"""The decode cache by source: ``cache_bytes=`` on every table source, the counts of
each source's cache in ``it.stats().source_caches``, and a verdict that names the
source whose cache thrashes, with the fix that applies to it."""

import json
import sqlite3

import datasets
import lance
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import stoker as sk

N = 1200
TINY = 1  # no block fits: every block is decoded again whenever a batch needs it


def _table():
    ids = np.arange(N)
    return pa.table({"id": ids, "x": ids / 4})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    table = _table()
    pq.write_table(table, root / "t.parquet", row_group_size=100)
    (root / "ipc").mkdir()
    feather.write_feather(table, root / "ipc" / "p.arrow", chunksize=256)
    lance.write_dataset(table, root / "t.lance")
    with sqlite3.connect(root / "t.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x REAL)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, i / 4) for i in range(N)])
    conn.close()
    with open(root / "t.jsonl", "w") as f:
        f.writelines(json.dumps({"id": i, "x": i / 4}) + "\n" for i in range(N))
    with open(root / "t.csv", "w") as f:
        f.write("id,x\n")
        f.writelines(f"{i},{i / 4}\n" for i in range(N))
    return root


MAKERS = {
    "parquet": lambda root, **kw: sk.from_parquet(root / "t.parquet", cache_dir=None, **kw),
    "sqlite": lambda root, **kw: sk.from_sqlite(root / "t.db", "t", block_rows=100, **kw),
    "jsonl": lambda root, **kw: sk.from_jsonl(root / "t.jsonl", **kw),
    "csv": lambda root, **kw: sk.from_csv(root / "t.csv", **kw),
    "lance": lambda root, **kw: sk.from_lance(root / "t.lance", **kw),
    "arrow_dataset": lambda root, **kw: sk.from_arrow(
        pds.dataset(root / "ipc", format="ipc"), **kw
    ),
    "arrow": lambda root, **kw: sk.from_arrow(_table(), **kw),
    "hf": lambda root, **kw: sk.from_hf(datasets.Dataset(_table()), **kw),
    "polars": lambda root, **kw: sk.from_polars(pl.DataFrame({"id": np.arange(N)}), **kw),
    "pandas": lambda root, **kw: sk.from_pandas(pd.DataFrame({"id": np.arange(N)}), **kw),
}
NAMES = {
    "parquet": "from_parquet('t.parquet')",
    "sqlite": "from_sqlite('t.db')",
    "jsonl": "from_jsonl('t.jsonl')",
    "csv": "from_csv('t.csv')",
    "lance": "from_lance('t.lance')",
    "arrow_dataset": "from_arrow(a pyarrow dataset of 1,200 rows)",
    "arrow": "from_arrow(an Arrow table of 1,200 rows)",
    "hf": "from_hf(a Dataset of 1,200 rows)",
    "polars": "from_polars(a Polars DataFrame of 1,200 rows)",
    "pandas": "from_pandas(a pandas DataFrame of 1,200 rows)",
}


def _run(ds):
    """Every batch of one epoch in order (blocks read whole), and the stats."""
    it = iter(sk.DataLoader(ds, batch_size=64))
    ids = [b["id"].tolist() for b in it]
    return ids, it.stats()


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_tiny_cache_bytes_gives_the_same_batches_and_counts_its_misses(root, kind):
    roomy_ids, roomy = _run(MAKERS[kind](root))
    tiny_ids, tiny = _run(MAKERS[kind](root, cache_bytes=TINY))
    assert tiny_ids == roomy_ids
    assert sorted(i for batch in tiny_ids for i in batch) == list(range(N))
    assert tiny.cache_misses > roomy.cache_misses
    assert tiny.redecoded_bytes > 0 == roomy.redecoded_bytes
    assert f"{tiny.cache_misses:,} misses" in str(tiny)
    (cache,) = tiny.source_caches
    assert (cache.name, cache.cache_bytes) == (NAMES[kind], TINY)
    assert cache.blocks_decoded == tiny.cache_misses
    assert cache.blocks_held == 0
    assert cache.name in str(tiny)  # the report's line for a source that decoded again
    (default,) = roomy.source_caches
    assert default.cache_bytes == 256 << 20
    assert default.redecoded_bytes == 0


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_cache_bytes_is_checked_alike_by_every_table_source(root, kind, bad):
    with pytest.raises(sk.ConfigError, match="cache_bytes must be an int >= 0"):
        MAKERS[kind](root, cache_bytes=bad)


def _thrashing_parquet(root):
    """Four row groups of 100 rows; the cache holds one (a shuffled batch touches all)."""
    one_group = 100 * 16  # two int64/float64 columns
    return sk.from_parquet(root / "t.parquet", cache_bytes=one_group, cache_dir=None)


def test_cache_thrash_from_a_source_gives_that_source_and_its_fix(root):
    ds = _thrashing_parquet(root)
    it = iter(sk.DataLoader(ds, batch_size=32, shuffle=True, seed=0))
    ids = np.concatenate([b["id"] for b in it])
    assert sorted(ids.tolist()) == list(range(N))
    stats = it.stats()
    (cache,) = stats.source_caches
    assert (cache.blocks, cache.unit, cache.blocks_held) == (12, "row groups", 1)
    assert cache.thrashes
    verdict = stats.verdict
    assert (verdict.kind, verdict.stage) == ("input-bound", "read")
    assert "from_parquet('t.parquet'): its cache_bytes (1.6 KiB) holds 1 of its 12 row groups" in (
        verdict.reason
    )
    # The fixes that apply to a Parquet file, with numbers: a budget for all 12 row
    # groups (19.2 kB: 1 MiB), a decoded copy, a block-aligned order.
    assert verdict.advice[0].startswith("from_parquet('t.parquet'): cache_bytes=1 << 20")
    assert any("cache_dir=" in a for a in verdict.advice)
    assert any("sampler=ds.shuffle_sampler(seed)" in a for a in verdict.advice)
    assert not any("more workers would help" in a for a in verdict.advice)
    assert "from_parquet('t.parquet')" in stats.bottleneck


def test_the_fix_applies_a_budget_large_enough_and_the_thrash_ends(root):
    """The advised cache_bytes holds every row group: nothing decoded again."""
    ds = sk.from_parquet(root / "t.parquet", cache_bytes=1 << 20, cache_dir=None)
    it = iter(sk.DataLoader(ds, batch_size=32, shuffle=True, seed=0))
    sum(1 for _ in it)
    stats = it.stats()
    assert stats.redecoded_bytes == 0
    assert stats.cache_misses == 12
    assert "thrashes" not in stats.verdict.reason


def test_in_a_mixture_the_verdict_names_only_the_source_that_thrashed(root):
    thrashing = _thrashing_parquet(root)
    roomy = sk.from_sqlite(root / "t.db", "t", block_rows=100)
    mixture = sk.mix({"pq": thrashing, "db": roomy}, weights={"pq": 0.5, "db": 0.5})
    it = iter(sk.DataLoader(mixture, batch_size=32, shuffle=True, seed=0))
    for _ in it:
        pass
    stats = it.stats()
    names = {c.name: c for c in stats.source_caches}
    assert set(names) <= {"from_parquet('t.parquet')", "from_sqlite('t.db')"}
    assert names["from_parquet('t.parquet')"].thrashes
    assert all(c.redecoded_bytes == 0 for n, c in names.items() if n != "from_parquet('t.parquet')")
    verdict = stats.verdict
    assert "from_parquet('t.parquet')" in verdict.reason
    assert "from_sqlite" not in verdict.reason + " ".join(verdict.advice)
    assert all(a.startswith("from_parquet('t.parquet'): ") for a in verdict.advice)


def test_source_caches_are_summed_over_process_workers(root):
    ds = _thrashing_parquet(root)
    kwargs = {"batch_size": 32, "shuffle": True, "seed": 0}
    it = iter(sk.DataLoader(ds, num_workers=2, worker_mode="process", **kwargs))
    sum(1 for _ in it)
    stats = it.stats()
    (cache,) = stats.source_caches
    assert cache.blocks_decoded == stats.cache_misses > 12
    assert cache.decoded_bytes == stats.decoded_bytes
    assert cache.redecoded_bytes == stats.redecoded_bytes > 0
    assert "from_parquet('t.parquet')" in stats.verdict.reason + stats.bottleneck


def test_made_up_counters_without_sources_get_every_sources_fix():
    stats = sk.LoaderStats(
        batches=100,
        samples=3200,
        wait_seconds=1.9,
        produce_seconds=1.9,
        fetch_seconds=1.8,
        collate_seconds=0.1,
        elapsed_seconds=2.0,
        worker_mode="inline",
        prefetch="caller thread",
        cache_misses=100,
        decoded_bytes=100_000,
        redecoded_bytes=98_000,
    )
    assert "thrashes" in stats.verdict.reason
    assert any("every table source" in a for a in stats.verdict.advice)
    assert stats.as_dict()["source_caches"] == []
