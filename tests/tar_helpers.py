"""Writing real tar shards in the WebDataset layout for tests."""

import io
import tarfile


def add_member(tar, name, data=b"", **fields):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def write_shards(root, shards=4, per_shard=5, prefix="shard"):
    """``shards`` tar files of ``per_shard`` samples each (fields txt and cls).

    Sample ``j`` of shard ``s`` has key ``f"{s:02d}{j:03d}"`` and txt ``b"s-j"``.
    Returns the shard paths, sorted.
    """
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        path = root / f"{prefix}-{s:02d}.tar"
        with tarfile.open(path, "w") as tar:
            for j in range(per_shard):
                key = f"{s:02d}{j:03d}"
                add_member(tar, f"{key}.txt", f"{s}-{j}".encode())
                add_member(tar, f"{key}.cls", str(j % 3).encode())
        paths.append(str(path))
    return paths


def all_keys(shards=4, per_shard=5):
    return sorted(f"{s:02d}{j:03d}" for s in range(shards) for j in range(per_shard))


def keys_of(batches):
    """The sample keys of loader batches (collated dicts) or single records."""
    out = []
    for b in batches:
        key = b["__key__"]
        out.extend(key if isinstance(key, list) else [key])
    return out
