"""Layer 4 (DESIGN.md): device page cache, constant host buffer, window buffering, access accumulator,
and the `FeatureStore` that stacks them over a `gpuio.TensorFile`. Pure tensor ops: GPU or CPU."""
from gpuio.cache.feature_store import FeatureStore, Ticket
from gpuio.cache.page_cache import POLICIES, PageCache
from gpuio.rows import InMemoryRows, MemmapRows  # the row tables live one layer down (gpuio.rows)

__all__ = ["FeatureStore", "Ticket", "PageCache", "POLICIES", "InMemoryRows", "MemmapRows"]
