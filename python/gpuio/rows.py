"""Between the tensor files and the caches: what a row table is (`Rows`, a typing.Protocol), and `InMemoryRows`, the
row table of a tensor already in memory (a `gpuio.TableCache` over it keeps its hot rows on the GPU). The baselines
the demos and benchmarks compare gpuio against (np.memmap rows, zero rows) are the applications'
(`gpuio_apps.baselines`).

A row table has `shape`, `torch_dtype`, `block_size`, `num_rows` and `gather(idx) -> rows on idx.device`,
like `gpuio.TensorFile`; `gpuio.TableCache` sits on any of them. What a table may offer beyond that is a
protocol of its own, which the cache, the loaders and the PyG stores name (isinstance) instead of probing for
attributes:
  PagedRows          gather_pages, reads_in_place: whole pages read with no per-row cut (TensorFile)
  SupportsPrefetch   prefetch(idx) -> gpuio.Future: starts the reads now (TensorFile, TableCache)
  SupportsScatter    scatter(idx, rows): rows written back (TensorFile)
  SupportsStats      stats() -> dict: the table's own counters (TensorFile, TableCache)
  SupportsLookahead  announce, submit, flush, window_batches: a cache that knows the coming batches and merges
                     their reads (TableCache); the loaders announce and submit ahead through it
  OnDevice           device: where the rows are delivered (TableCache)
`RowSource` (shape, gather) is what the loaders and the PyG store read from: a Rows, or a TableCache.
`require(obj, protocol, what)` refuses a table without a capability in one line naming what is missing.

Other processes: `InMemoryRows` pickles as its tensor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, runtime_checkable

import torch

from gpuio._index import check_ids

if TYPE_CHECKING:
    from gpuio.future import Future


@runtime_checkable
class RowSource(Protocol):
    """What the loaders and the PyG store read rows from: a shape and gather (a gpuio.TableCache, any Rows)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """(rows, *row_shape)."""
        ...

    def gather(self, idx: Any) -> torch.Tensor:
        """Rows idx."""
        ...


@runtime_checkable
class Rows(RowSource, Protocol):
    """A table of rows: shape[0] rows of shape[1:] elements of torch_dtype, read by gather (what the cache
    sits on)."""

    @property
    def num_rows(self) -> int:
        """shape[0]."""
        ...

    @property
    def torch_dtype(self) -> torch.dtype:
        """The rows' element type."""
        ...

    @property
    def block_size(self) -> int:
        """Bytes per storage block (the cache sizes its pages from it; 4096 for in-memory tables)."""
        ...

    def gather(self, idx: Any) -> torch.Tensor:
        """Rows idx (int64 ids in [0, num_rows)), delivered on idx's device."""
        ...


@runtime_checkable
class PagedRows(Rows, Protocol):
    """A row table that also reads pages of consecutive rows in one request (gpuio.TensorFile)."""

    def reads_in_place(self, device: Any) -> bool:
        """True when reads bound for device land in request order (no reordering copy needed)."""
        ...

    def gather_pages(self, pages: Any, page_rows: int, device: Any = None) -> torch.Tensor:
        """Pages of page_rows consecutive rows, [n, page_rows, ...] on device; rows past the end are zeros."""
        ...


@runtime_checkable
class SupportsPrefetch(Protocol):
    """Rows read asynchronously: prefetch starts the reads at once."""

    def prefetch(self, idx: Any) -> "Future":
        """Start reading rows idx; the future's wait() returns them (as gather would)."""
        ...


@runtime_checkable
class SupportsScatter(Protocol):
    """A writable row table."""

    def scatter(self, idx: Any, rows: Any) -> None:
        """Write rows at row ids idx."""
        ...


@runtime_checkable
class SupportsStats(Protocol):
    """A table with counters of its own (rows and blocks read, ...)."""

    def stats(self) -> dict:
        """The table's counters."""
        ...


@runtime_checkable
class SupportsLookahead(Protocol):
    """A cache that is told the coming batches (announce) and merges the reads of submitted ones (submit, flush):
    what the loaders drive `window_batches` ahead (gpuio.TableCache)."""

    @property
    def window_batches(self) -> int:
        """Announced batches whose uses the cache's eviction knows (0: none)."""
        ...

    def announce(self, idx: Any) -> None:
        """Declare the rows a coming batch will read."""
        ...

    def submit(self, idx: Any) -> "Future":
        """Queue rows idx; their reads may merge with later submissions'."""
        ...

    def flush(self) -> None:
        """Serve every queued submission now."""
        ...


@runtime_checkable
class OnDevice(Protocol):
    """A row source that delivers its rows on a device of its own (not on the ids' device)."""

    @property
    def device(self) -> Any:
        """The torch.device rows are delivered on."""
        ...


def _members(protocol: type) -> list[str]:
    names: list[str] = []
    for cls in reversed(protocol.__mro__):
        if cls in (Protocol, Generic, object):
            continue
        names += [n for n in cls.__dict__ if not n.startswith("_") and n not in names]
    return names


def missing(obj: Any, protocol: type) -> list[str]:
    """The members of `protocol` that obj lacks (empty: obj offers that capability)."""
    return [n for n in _members(protocol) if not hasattr(obj, n)]


def require(obj: Any, protocol: type, what: str, hint: str = "") -> Any:
    """obj, or TypeError in one line naming `what`, the protocol, obj's type and the members it lacks (then hint)."""
    lacks = missing(obj, protocol)
    if lacks:
        kind = type(obj)
        members = ", ".join(_members(protocol))
        raise TypeError(f"{what} must be a row table (gpuio.rows.{protocol.__name__}: {members}); "
                        f"got a {kind.__module__}.{kind.__qualname__} without {', '.join(lacks)}{hint}")
    return obj


def check_row_ids(idx: Any, num_rows: int) -> torch.Tensor:
    """idx as a flat int64 tensor, checked by gpuio._index.check_ids (integers in [0, num_rows))."""
    idx = check_ids(idx, "row ids", upper=num_rows)
    return (idx if isinstance(idx, torch.Tensor) else torch.from_numpy(idx)).flatten()


class InMemoryRows:
    """Rows held in a tensor: features already in memory, served by index_select (the demo's upper bound)."""

    def __init__(self, table: torch.Tensor, block_size: int = 4096):
        self.table = table
        self.block_size = block_size

    @property
    def shape(self):
        """(rows, *row_shape) of the table."""
        return tuple(self.table.shape)

    def __repr__(self) -> str:
        return f"gpuio.rows.InMemoryRows(shape={tuple(self.table.shape)}, dtype={self.table.dtype}, device={self.table.device})"

    @property
    def num_rows(self) -> int:
        """shape[0]."""
        return self.table.shape[0]

    @property
    def torch_dtype(self):
        """The table's dtype."""
        return self.table.dtype

    def gather(self, idx) -> torch.Tensor:
        """Rows idx (checked: integers in [0, num_rows)) on idx's device."""
        idx = check_row_ids(idx, self.num_rows)
        return self.table.index_select(0, idx.to(self.table.device)).to(idx.device)


def __getattr__(name: str):
    if name in ("MemmapRows", "ZeroRows"):  # the demos' baselines left the library: say where they went
        raise AttributeError(f"gpuio.rows.{name} moved to gpuio_apps.baselines.{name} (an application module)")
    raise AttributeError(f"module 'gpuio.rows' has no attribute {name!r}")


__all__ = ["RowSource", "Rows", "PagedRows", "SupportsPrefetch", "SupportsScatter", "SupportsStats",
           "SupportsLookahead", "OnDevice", "missing", "require", "check_row_ids", "InMemoryRows"]
