"""`gpuio.pyg.FeatureStore`: PyG's remote-backend FeatureStore over gpuio tables.

Each (group_name, attr_name) maps to a row table: a `gpuio.FeatureStore` (tiered cache), a
`gpuio.TensorFile`, any row source with `gather(idx)`, or a plain tensor (small attributes such as
labels). `NodeLoader(data=(feature_store, graph_store), ...)` then fetches `x[n_id]` through gpuio.
"""
from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import FeatureStore as PygFeatureStore
from torch_geometric.data import TensorAttr

from gpuio._index import check_ids


def _rows(index, num_rows: int) -> torch.Tensor | None:
    if index is None:
        return None
    if isinstance(index, slice):
        return torch.arange(num_rows)[index]
    index = check_ids(index, "index", upper=num_rows)
    return index if isinstance(index, torch.Tensor) else torch.from_numpy(index)


class FeatureStore(PygFeatureStore):
    def __init__(self):
        super().__init__(tensor_attr_cls=TensorAttr)
        self._tables: dict[tuple, object] = {}

    @staticmethod
    def _key(attr: TensorAttr) -> tuple:
        return (attr.group_name, attr.attr_name)

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        key = self._key(attr)
        if isinstance(tensor, np.ndarray):
            tensor = torch.from_numpy(tensor)
        if not isinstance(tensor, torch.Tensor):
            if not hasattr(tensor, "gather"):
                raise TypeError(f"put_tensor takes a tensor, ndarray or gpuio row table (with gather), "
                                f"got {type(tensor).__name__}")
            if attr.index is not None:
                raise ValueError(f"a row table replaces {key} whole; index must be None, got {attr.index!r}")
            self._tables[key] = tensor
            return True
        if attr.index is None:
            self._tables[key] = tensor
            return True
        table = self._tables.get(key)
        if table is None:
            raise KeyError(f"no tensor {key} to write rows into; put it whole first")
        rows = _rows(attr.index, self._num_rows(table))
        if isinstance(table, torch.Tensor):
            table[rows] = tensor.to(table.device, table.dtype)
        elif hasattr(table, "scatter"):
            table.scatter(rows, tensor)
        else:
            raise TypeError(f"{key} is backed by {type(table).__name__}, which cannot be written")
        return True

    def _get_tensor(self, attr: TensorAttr):
        table = self._tables.get(self._key(attr))
        if table is None:
            return None
        rows = _rows(attr.index, self._num_rows(table))
        if isinstance(table, torch.Tensor):
            return table if rows is None else table[rows.to(table.device)]
        if rows is None:
            rows = torch.arange(self._num_rows(table))
        return table.gather(rows)

    def _multi_get_tensor(self, attrs):
        # Submit every gpuio read first (they proceed together), then collect.
        pending = []
        for attr in attrs:
            table = self._tables.get(self._key(attr))
            if table is not None and hasattr(table, "prefetch") and attr.index is not None:
                pending.append(table.prefetch(_rows(attr.index, self._num_rows(table))))
            else:
                pending.append(self._get_tensor(attr))
        return [p.wait() if hasattr(p, "wait") else p for p in pending]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._tables.pop(self._key(attr), None) is not None

    def _get_tensor_size(self, attr: TensorAttr):
        table = self._tables.get(self._key(attr))
        return None if table is None else tuple(table.shape)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=g, attr_name=a) for g, a in self._tables]

    @staticmethod
    def _num_rows(table) -> int:
        return int(table.shape[0])
