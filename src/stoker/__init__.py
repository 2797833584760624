"""stoker keeps accelerators fed: a deterministic, exactly resumable data loader.

Example:
    >>> import stoker as sk
    >>> loader = sk.DataLoader(sk.range(0, 10), batch_size=4, shuffle=True, seed=0)
    >>> [len(batch) for batch in loader]
    [4, 4, 2]

``sk.testing`` (the conformance checks) is imported on first use, so ``import stoker``
stays light.
"""

from typing import TYPE_CHECKING

from . import vision as vision
from ._batching.pad import pad_collate as pad_collate
from ._collate import default_collate as default_collate
from ._dataset import Dataset as Dataset
from ._elastic import merge_host_states as merge_host_states
from ._hosts import Shard as Shard
from ._iterator import LoaderIterator as LoaderIterator
from ._iterdataset import IterDataset as IterDataset
from ._loader import DataLoader as DataLoader
from ._progress import Progress as Progress
from ._progress import progress as progress
from ._sampling.base import Sampler as Sampler
from ._sampling.batch import BatchSampler as BatchSampler
from ._sampling.foreign import ForeignSampler as ForeignSampler
from ._sampling.random import RandomSampler as RandomSampler
from ._sampling.sequential import SequentialSampler as SequentialSampler
from ._sampling.tokens import TokenBatchSampler as TokenBatchSampler
from ._sampling.weighted import WeightedSampler as WeightedSampler
from ._source_caches import SourceCache as SourceCache
from ._sources.arrays import from_arrays as from_arrays
from ._sources.arrow import from_arrow as from_arrow
from ._sources.arrow import from_pandas as from_pandas
from ._sources.arrow import from_polars as from_polars
from ._sources.block_shuffle import ChunkedShuffleSampler as ChunkedShuffleSampler
from ._sources.csv_lines import from_csv as from_csv
from ._sources.files import from_files as from_files
from ._sources.hf import from_hf as from_hf
from ._sources.image_folder import from_image_folder as from_image_folder
from ._sources.iterable import from_iterable as from_iterable
from ._sources.lance import from_lance as from_lance
from ._sources.lines import from_jsonl as from_jsonl
from ._sources.memory import from_sequence as from_sequence
from ._sources.parquet import from_parquet as from_parquet
from ._sources.range import range as range
from ._sources.retry import RetryPolicy as RetryPolicy
from ._sources.sqlite import from_sqlite as from_sqlite
from ._sources.tar_shards import from_tar_shards as from_tar_shards
from ._stats import LoaderStats as LoaderStats
from ._stats import SourceShare as SourceShare
from ._transforms.concat import concat as concat
from ._transforms.mix import mix as mix
from ._transforms.pack import pack as pack
from ._transforms.zip import zip as zip
from ._typing import releases_gil as releases_gil
from ._typing import shares_process as shares_process
from ._verdict import Verdict as Verdict
from ._worker_info import WorkerInfo as WorkerInfo
from ._worker_info import get_worker_info as get_worker_info
from .errors import CollateError as CollateError
from .errors import ConfigError as ConfigError
from .errors import DecodeError as DecodeError
from .errors import FilteredOut as FilteredOut
from .errors import IteratorFailed as IteratorFailed
from .errors import LoaderTimeout as LoaderTimeout
from .errors import MissingExtra as MissingExtra
from .errors import NotPicklable as NotPicklable
from .errors import NotSupportedError as NotSupportedError
from .errors import RecordValueError as RecordValueError
from .errors import RemoteReadError as RemoteReadError
from .errors import StateError as StateError
from .errors import StokerError as StokerError
from .errors import TarShardError as TarShardError
from .errors import WorkerCrashed as WorkerCrashed
from .errors import WorkerError as WorkerError

if TYPE_CHECKING:
    from . import testing as testing

__version__ = "0.1.0"

__all__ = [
    "BatchSampler",
    "ChunkedShuffleSampler",
    "CollateError",
    "ConfigError",
    "DataLoader",
    "Dataset",
    "DecodeError",
    "FilteredOut",
    "ForeignSampler",
    "IterDataset",
    "IteratorFailed",
    "LoaderIterator",
    "LoaderStats",
    "LoaderTimeout",
    "MissingExtra",
    "NotPicklable",
    "NotSupportedError",
    "Progress",
    "RandomSampler",
    "RecordValueError",
    "RemoteReadError",
    "RetryPolicy",
    "Sampler",
    "SequentialSampler",
    "Shard",
    "SourceCache",
    "SourceShare",
    "StateError",
    "StokerError",
    "TarShardError",
    "Verdict",
    "TokenBatchSampler",
    "WeightedSampler",
    "WorkerCrashed",
    "WorkerError",
    "WorkerInfo",
    "__version__",
    "concat",
    "default_collate",
    "from_arrays",
    "from_arrow",
    "from_csv",
    "from_files",
    "from_hf",
    "from_image_folder",
    "from_iterable",
    "from_jsonl",
    "from_lance",
    "from_pandas",
    "from_parquet",
    "from_polars",
    "from_sequence",
    "from_sqlite",
    "from_tar_shards",
    "get_worker_info",
    "merge_host_states",
    "mix",
    "pack",
    "pad_collate",
    "progress",
    "range",
    "releases_gil",
    "shares_process",
    "testing",
    "vision",
    "zip",
]


def __getattr__(name: str) -> object:
    """Import ``stoker.testing`` on first use of ``sk.testing``."""
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
