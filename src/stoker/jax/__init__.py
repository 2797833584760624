"""JAX adapter: batches onto devices, sharded, a few ahead, with an exact state.

``import stoker.jax`` imports JAX (the ``stoker[jax]`` extra); ``import stoker``
never does.

* :func:`device_put` places every batch with a sharding (one host, or a batch
  that is the same on every host).
* :func:`global_batches` turns each host's batch into its rows of global arrays
  (multi-host data loading with ``shard="jax"``).
* :func:`data_parallel` and :func:`fsdp` build meshes whose devices split the
  batch, as a :class:`MeshPreset`.

Each device receives a NumPy view of its own rows of the batch stoker collated
once, so the host batch is never copied or concatenated again on its way. Both
wrappers keep ``state_dict()`` exact: it is the state after the last batch
yielded, not after the batches already on their way.

JAX canonicalises dtypes: without ``jax_enable_x64``, stoker's int64 and float64
columns arrive as int32 and float32 (collate into 32-bit types to skip that
conversion).

Example:
    >>> import jax, numpy as np, stoker as sk
    >>> import stoker.jax as sj
    >>> loader = sk.DataLoader(sk.from_arrays(x=np.ones((8, 3), np.float32)), batch_size=4)
    >>> preset = sj.data_parallel(jax.devices()[:1])
    >>> for batch in sj.device_put(loader, preset):
    ...     print(batch["x"].shape, batch["x"].sharding.spec == jax.P("data"))
    (4, 3) True
    (4, 3) True
"""

from ._global import global_batch as global_batch
from ._global import global_batches as global_batches
from ._presets import MeshPreset as MeshPreset
from ._presets import data_parallel as data_parallel
from ._presets import fsdp as fsdp
from ._put import ShardingTree as ShardingTree
from ._put import device_put as device_put
from ._put import device_put_batch as device_put_batch

__all__ = [
    "MeshPreset",
    "ShardingTree",
    "data_parallel",
    "device_put",
    "device_put_batch",
    "fsdp",
    "global_batch",
    "global_batches",
]
