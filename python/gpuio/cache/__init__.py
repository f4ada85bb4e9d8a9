"""The cache layer (DESIGN.md layer 8): device page cache, constant host buffer, window buffering, access accumulator,
and the `TableCache` that stacks them over a `gpuio.TensorFile`. Pure tensor ops: GPU or CPU."""
from gpuio.cache.table_cache import TableCache
from gpuio.cache.page_cache import POLICIES, PageCache
from gpuio.rows import InMemoryRows  # the row table of a tensor in memory lives one layer down (gpuio.rows)

_MOVED = {"MemmapRows": "gpuio_apps.baselines.MemmapRows", "belady": "gpuio_apps.bench.belady"}

__all__ = ["TableCache", "PageCache", "POLICIES", "InMemoryRows"]


def __getattr__(name: str):
    if name == "Ticket":  # the old name of what submit returns, kept for one release
        from gpuio.future import deprecated_alias

        return deprecated_alias("gpuio.cache.Ticket")
    if name == "FeatureStore":  # the table cache's old name, kept for one release
        from gpuio._deprecated import NOT_PYGS, renamed

        return renamed("gpuio.cache.FeatureStore", "gpuio.cache.TableCache", TableCache, NOT_PYGS)
    if name in _MOVED:  # measurement pieces that left the library: say where they went
        raise AttributeError(f"gpuio.cache.{name} moved to {_MOVED[name]} (an application module: the library "
                             f"does not import it)")
    raise AttributeError(f"module 'gpuio.cache' has no attribute {name!r}")
