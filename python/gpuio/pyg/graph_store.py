"""`gpuio.pyg.GraphStore`: PyG's remote-backend GraphStore, edges held in memory (CPU, pinned, or GPU).

The graph topology is small next to the features (8-16 bytes per edge), so it stays in memory where the
sampler runs; `gpuio_csc()` hands `gpuio.pyg.NeighborSampler` the CSC form it samples from.
"""
from __future__ import annotations

import torch
from torch_geometric.data import EdgeAttr
from torch_geometric.data import GraphStore as PygGraphStore

from gpuio.graph.csc import CSC, csc_from_edge_index


def _ptr_to_index(ptr: torch.Tensor) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device), ptr[1:] - ptr[:-1])


def _pair(edge_index, layout: str) -> tuple:
    """(row, col) from a [2, E] tensor (PyG's edge_index) or a pair of 1-D tensors (CSR: (rowptr, col),
    CSC: (row, colptr))."""
    if isinstance(edge_index, torch.Tensor) and edge_index.dim() == 2 and edge_index.shape[0] == 2:
        return edge_index[0], edge_index[1]
    if (isinstance(edge_index, (tuple, list)) and len(edge_index) == 2
            and all(isinstance(t, torch.Tensor) and t.dim() == 1 for t in edge_index)):
        return tuple(edge_index)
    what = (f"a tensor of shape {tuple(edge_index.shape)}" if isinstance(edge_index, torch.Tensor)
            else type(edge_index).__name__)
    raise TypeError(f"edge_index ({layout}) must be a [2, E] tensor or a pair of 1-D tensors, got {what}")


class GraphStore(PygGraphStore):
    """Edges by (edge_type, layout); put_edge_index takes PyG's [2, E] edge_index or a (row, col) pair
    (CSR: (rowptr, col); CSC: (row, colptr)), get_edge_index returns the pair, and a missing one raises
    KeyError. `gpuio_csc()` builds the sampler's CSC from whichever layout is stored."""

    def __init__(self):
        super().__init__(edge_attr_cls=EdgeAttr)
        self._edges: dict[tuple, tuple] = {}
        self._csc: dict[tuple, CSC] = {}

    @staticmethod
    def _key(attr: EdgeAttr) -> tuple:
        return (attr.edge_type, attr.layout.value)

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        self._edges[self._key(edge_attr)] = (_pair(edge_index, edge_attr.layout.value), edge_attr)
        self._csc.pop(edge_attr.edge_type, None)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr):
        entry = self._edges.get(self._key(edge_attr))
        return None if entry is None else entry[0]

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        self._csc.pop(edge_attr.edge_type, None)
        return self._edges.pop(self._key(edge_attr), None) is not None

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """Every EdgeAttr stored (one per edge type and layout)."""
        return [attr for _, attr in self._edges.values()]

    def gpuio_csc(self, edge_type=None) -> CSC:
        """CSC of one edge type (the only one when edge_type is None), built once and cached."""
        attrs = self.get_all_edge_attrs()
        types = {a.edge_type for a in attrs}
        if edge_type is None:
            if len(types) != 1:
                raise ValueError(f"the store holds edge types {sorted(map(str, types))}; name one")
            edge_type = next(iter(types))
        if edge_type not in self._csc:
            attr = next((a for a in attrs if a.edge_type == edge_type), None)
            if attr is None:
                raise KeyError(f"no edges of type {edge_type!r}")
            (a, b), _ = self._edges[self._key(attr)]
            layout = attr.layout.value
            row, col = (a, b) if layout == "coo" else ((_ptr_to_index(a), b) if layout == "csr"
                                                       else (a, _ptr_to_index(b)))
            n = attr.size[1] if attr.size is not None else None
            if n is not None and attr.size[0] != attr.size[1]:
                raise ValueError(f"bipartite edge type {edge_type!r} (size {attr.size}) is not supported")
            self._csc[edge_type] = csc_from_edge_index(torch.stack([row.long(), col.long()]), n)
        return self._csc[edge_type]

__all__ = ["GraphStore"]
