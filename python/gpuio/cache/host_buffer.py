"""Constant host buffer (GIDS): the hottest rows, loaded once, held in host memory for the whole run.

With CUDA the buffer is pinned and, as in GIDS, read in place: a CUDA view of it (gpuio.gpu.mapped_view)
lets torch's index_select kernel gather the requested rows over PCIe straight into GPU memory — no host-side
gather, no staging copy, no CPU thread. This tier's gather is the one place gpuio spends SMs on moving data
(a gather kernel, like the GPU page cache's); storage reads still use none. Without a GPU (or when the view
cannot be made) the CPU gathers the rows instead. Rows in the buffer never enter the GPU page cache, so the
two tiers add up.

A HostBuffer pickles as its rows and their contents and is rebuilt in the receiver, pinned there where its index
lives on CUDA; nothing is read again. Unpinned contents travel as the tensor itself (torch's multiprocessing moves
it into shared memory once: spawned DataLoader workers then map the sender's pages, no copy each); pinned ones
(registered with CUDA, which shared memory would undo) travel by value.
"""
from __future__ import annotations

import torch

from gpuio._pinned import page_locked
from gpuio.gpu import in_bad_fork, mapped_view

_LOAD_ROWS_MAX = 65536  # rows per read while filling the buffer: bounds the staging memory at start


def pinned_empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """A page-locked host tensor of exactly its size (pageable where there is no CUDA, torch's pinned memory where
    CUDA refuses gpuio's). torch's pin_memory=True rounds every block up to a power of two: a 3.2 GB host buffer
    pinned 4 GiB, which put the IGBH job (2 M papers, 20 % host buffer, 12 GiB cgroup) over its memory limit on
    the H100. Here the memory is gpuio._pinned.page_locked's, an owned block of the process's one pinned pool (2 MiB
    pages where the kernel gives them, registered portable and mapped, so mapped_view works on it; unregistered and
    unmapped when the last view of it is gone; gpuio.safetensors.staging() counts it as host_buffer)."""
    size = torch.Size(shape)
    nbytes = size.numel() * torch.empty((), dtype=dtype).element_size()
    if nbytes == 0 or not torch.cuda.is_available() or in_bad_fork():
        return torch.empty(size, dtype=dtype)
    raw = page_locked(nbytes)
    if raw is None:
        return torch.empty(size, dtype=dtype, pin_memory=True)
    return raw.view(dtype).view(size)


class HostBuffer:
    def __init__(self, source, rows: torch.Tensor, num_rows: int, index_device):
        """source: a row table with gather(idx) -> rows; rows: ids to hold (distinct, in range)."""
        rows = rows.to("cpu", torch.long)
        self.data = pinned_empty((rows.numel(), *source.shape[1:]), source.torch_dtype)  # exactly its size
        for lo in range(0, rows.numel(), _LOAD_ROWS_MAX):  # (torch's pinning rounds up to 2^k)
            self.data[lo:lo + _LOAD_ROWS_MAX] = source.gather(rows[lo:lo + _LOAD_ROWS_MAX])
        self._index(rows, num_rows, index_device)

    def _index(self, rows: torch.Tensor, num_rows: int, index_device) -> None:
        self.rows = rows
        # row id -> position in the buffer, -1 when not held; lives where lookups run.
        self.row_slot = torch.full((num_rows,), -1, dtype=torch.int32, device=index_device)
        self.row_slot[rows.to(index_device)] = torch.arange(rows.numel(), dtype=torch.int32,
                                                            device=index_device)
        self._views: dict = {}  # CUDA device -> the mapped view of data (None: not possible there)

    @property
    def num_rows(self) -> int:
        return int(self.rows.numel())

    def __reduce__(self):
        # Never a temporary tensor: spawn hands a shared tensor's descriptor to the child only when it starts, and a
        # temporary's would be closed by then. Never the pinned pages themselves (shared memory would replace them).
        data = self.data.numpy() if self.data.is_pinned() else self.data
        return (_arrive, (self.rows, data, self.row_slot.numel(), str(self.row_slot.device)))

    def lookup(self, rows: torch.Tensor) -> torch.Tensor:
        """Buffer position of each row (int64), -1 where the row is not held."""
        return self.row_slot[rows].long()

    def read(self, slots: torch.Tensor, device) -> torch.Tensor:
        """Rows at buffer positions `slots`, delivered on `device`."""
        dev = torch.device(device)
        if dev.type == "cuda":
            if dev not in self._views:
                self._views[dev] = mapped_view(self.data, dev)
            view = self._views[dev]
            if view is not None:
                return view.index_select(0, slots.to(dev, non_blocking=True))
        out = self.data.index_select(0, slots.cpu())
        if dev.type == "cuda":
            out = out.pin_memory().to(dev, non_blocking=True)
        return out


def pick_hot_rows(num_rows: int, count: int, hot_scores=None) -> torch.Tensor:
    """The `count` rows with the highest `hot_scores` (one per row; gpuio.graph.degree_scores or
    pagerank_scores rank a graph's nodes)."""
    if count < 0:
        raise ValueError(f"host_cache_rows must be >= 0, got {count}")
    count = min(count, num_rows)
    if count == 0:
        return torch.empty(0, dtype=torch.long)
    if hot_scores is None:
        raise ValueError("host_cache_rows > 0 needs hot_scores (one per row: gpuio.graph.degree_scores(graph) or "
                         "gpuio.graph.pagerank_scores(graph) rank a graph's nodes)")
    scores = torch.as_tensor(hot_scores).to("cpu", torch.double).flatten()
    if scores.numel() != num_rows:
        raise ValueError(f"hot_scores has {scores.numel()} entries, the table has {num_rows} rows")
    return torch.topk(scores, count).indices.sort().values


def _arrive(rows: torch.Tensor, data: torch.Tensor, num_rows: int, index_device: str) -> HostBuffer:
    """Unpickle a HostBuffer: its contents as sent, pinned where its index lives on CUDA."""
    dev = torch.device(index_device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"a gpuio host buffer indexed on {dev} arrived in a process without CUDA: send a "
                           f"TableCache made with device='cpu', or use it where CUDA is")
    buf = HostBuffer.__new__(HostBuffer)
    if not isinstance(data, torch.Tensor):
        data = torch.from_numpy(data)
    if dev.type == "cuda":
        buf.data = pinned_empty(data.shape, data.dtype)
        buf.data.copy_(data)
    else:
        buf.data = data
    buf._index(rows, num_rows, dev)
    return buf

__all__ = ["pinned_empty", "HostBuffer", "pick_hot_rows"]
