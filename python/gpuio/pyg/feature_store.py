"""`gpuio.pyg.PygFeatureStore`: PyG's remote-backend FeatureStore over gpuio tables.

Each (group_name, attr_name) maps to a row table indexed by node (or edge) id: a `gpuio.TableCache`
(tiered cache), a `gpuio.TensorFile`, any row source with `gather(idx)`, or a tensor.
`NodeLoader(data=(feature_store, graph_store), ...)` then fetches `x[n_id]` through gpuio.

PyG's contract, as its base class and reference store (`torch_geometric.testing.MyFeatureStore`) define it:
- `put_tensor(rows, group, attr, index)`: `index` says which ids the rows belong to. On a new attribute it
  creates the table (ids 0..max(index); ids it does not name read as zeros, like a fresh TensorFile); on an
  existing one it writes those rows in place (a TensorFile-backed table on disk). index=None puts the
  whole table (replacing the old one). A row table object (TensorFile, gpuio.TableCache) is put whole.
- `get_tensor(..., index)`: the rows of those ids (int: one row; any-shaped index: index.shape + row
  shape; None or `:`: the whole table in id order); a missing attribute raises KeyError.
- `update_tensor(rows, ..., index)`: with an index, writes those rows and keeps the others (PyG's default,
  remove then put, would drop them); with index=None, replaces the table.
- `remove_tensor`, `get_tensor_size` (None when missing), `get_all_tensor_attrs`, `multi_get_tensor`
  (gpuio reads of all attributes in flight together), views (`store['A', 'x', idx]`, `store.A.x[idx]`).

A tensor put whole into a memory store is kept as is, not copied (as `Data.x = t` does): writing rows
later writes into it. `PygFeatureStore(root=dir)` keeps the tensors put into it in new `gpuio.TensorFile`s
under `dir` (one per attribute; removed with the attribute) instead of in memory; `tensor_file_options`
go to `TensorFile.create` (an existing file is replaced only with overwrite=True). Every element type torch
has a stored form for works, bfloat16 included; `PygFeatureStore(dtype=torch.bfloat16)` (or "bfloat16",
"float16", np.float32, ...) stores every new table in that type, cast as torch's `to` casts (half the bytes
of float32 features); rows written later into a table are cast to its type the same way.

Other processes (PyG loaders with workers, spawned ranks): the store pickles with its tables, each as what it is
(a TensorFile or gpuio.TableCache reopens in the receiver, a tensor travels); a forked child inherits it, its
files reopening themselves on first use. The files a store made under root stay that store's: a copy in another
process (pickled or forked) never deletes them when it removes the attribute.
"""
from __future__ import annotations

import os
import re

import numpy as np
import torch
from torch_geometric.data import FeatureStore as FeatureStoreBase
from torch_geometric.data import TensorAttr

from gpuio._dtypes import element_type
from gpuio.rows import RowSource, SupportsPrefetch, SupportsScatter, require
from gpuio.tensor import TensorFile, row_ids


def _is_whole(index) -> bool:
    return index is None or (isinstance(index, slice) and index == slice(None))


def _new_rows(index, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, rows [len(ids), ...]) for `values` put into a new attribute at `index` (no table to count
    from yet): an int takes one row, a slice consecutive ids from its start, an id tensor of any shape
    takes values of shape index.shape + row shape."""
    if isinstance(index, slice):
        start, step = index.start or 0, index.step or 1
        if start < 0 or step <= 0 or values.dim() == 0:
            raise ValueError(f"a slice index on a new attribute needs start >= 0, step > 0 and rows, got "
                             f"{index} for values of shape {tuple(values.shape)}")
        ids = torch.arange(start, start + values.shape[0] * step, step)
        if index.stop is not None and ids.numel() and int(ids[-1]) >= index.stop:
            raise ValueError(f"index {index} names fewer ids than the {values.shape[0]} rows given")
        return ids, values
    ids = index if isinstance(index, torch.Tensor) else torch.as_tensor(np.asarray(index))
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"index on a new attribute must hold integer ids, got dtype {ids.dtype}")
    if tuple(values.shape[:ids.dim()]) != tuple(ids.shape):
        raise ValueError(f"index of shape {tuple(ids.shape)} needs values of shape {tuple(ids.shape)} + row "
                         f"shape, got {tuple(values.shape)}")
    row_shape = values.shape[ids.dim():]
    ids = ids.long().flatten().cpu()
    if ids.numel() and int(ids.min()) < 0:
        raise ValueError(f"index on a new attribute names ids, which are >= 0; got {int(ids.min())}")
    return ids, values.reshape(ids.numel(), *row_shape)


class PygFeatureStore(FeatureStoreBase):
    """PyG's FeatureStore over gpuio row tables (see the module docstring); the loaders' feature side."""
    def __init__(self, root=None, tensor_attr_cls=None, dtype=None, **tensor_file_options):
        """tensor_attr_cls: a TensorAttr subclass that orders or fixes the key fields (PyG's option). dtype:
        the element type of every new table (a torch dtype or NumPy name; None keeps each tensor's own)."""
        self.store_dtype = None if dtype is None else element_type(dtype, "PygFeatureStore dtype").torch
        super().__init__(tensor_attr_cls=tensor_attr_cls or TensorAttr)
        self._tables: dict[tuple, object] = {}
        self._owned: dict[tuple, TensorFile] = {}  # TensorFiles this store created under root
        self._made_in = os.getpid()  # the process that may delete them (not a pickled or forked copy)
        self.root = None if root is None else os.fspath(root)
        self._file_options = tensor_file_options
        self._files_made = 0

    @staticmethod
    def _key(attr: TensorAttr) -> tuple:
        return (attr.group_name, attr.attr_name)

    def _table(self, attr: TensorAttr):
        key = self._key(attr)
        if key not in self._tables:
            raise KeyError(f"no tensor for group_name={key[0]!r}, attr_name={key[1]!r}; the store holds "
                           f"{sorted(map(str, self._tables))}")
        return self._tables[key]

    # -- put / update / remove ------------------------------------------------------------------------
    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        key = self._key(attr)
        if isinstance(tensor, np.ndarray):
            tensor = torch.from_numpy(tensor)
        if not isinstance(tensor, torch.Tensor):
            require(tensor, RowSource, "put_tensor's tensor (not a tensor or ndarray)")
            if not _is_whole(attr.index):
                raise ValueError(f"a row table replaces {key} whole; index must be None, got {attr.index!r}")
            self._drop(key)
            self._tables[key] = tensor
            return True
        if key in self._tables and not _is_whole(attr.index):
            self._write_rows(key, self._tables[key], attr.index, tensor)
            return True
        if _is_whole(attr.index):
            self._drop(key)
            self._tables[key] = self._store_new(key, tensor)
            return True
        ids, rows = _new_rows(attr.index, tensor)
        full = torch.zeros((int(ids.max()) + 1 if ids.numel() else 0, *rows.shape[1:]), dtype=rows.dtype,
                           device=rows.device)
        full[ids.to(rows.device)] = rows
        self._tables[key] = self._store_new(key, full)
        return True

    def _store_new(self, key: tuple, tensor: torch.Tensor):
        """A new table holding `tensor` (cast to store_dtype if set): the tensor itself, or a new TensorFile
        under root."""
        if self.store_dtype is not None:
            tensor = tensor.to(self.store_dtype)
        if self.root is None:
            return tensor
        if tensor.dim() == 0:
            raise ValueError(f"{key}: a store with root= keeps tables of rows in TensorFiles; got a 0-d tensor")
        os.makedirs(self.root, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(map(str, key))).strip("_")
        self._files_made += 1
        path = os.path.join(self.root, f"{self._files_made:04d}-{name}.npy")
        tf = TensorFile.create(path, tuple(tensor.shape), tensor.dtype, **self._file_options)
        if tensor.shape[0]:
            tf.scatter(torch.arange(tensor.shape[0]), tensor.cpu())
        self._owned[key] = tf
        return tf

    @staticmethod
    def _write_rows(key: tuple, table, index, rows) -> None:
        ids, lead = row_ids(index, table.shape[0])
        want = (*(lead or ()), *table.shape[1:])
        if tuple(rows.shape) != want:
            raise ValueError(f"index {index!r} into {key} takes rows of shape {want}, got {tuple(rows.shape)}")
        if isinstance(table, torch.Tensor):
            rows = rows.to(table.device, table.dtype).reshape(ids.numel(), *table.shape[1:])
            table[ids.to(table.device)] = rows
        elif isinstance(table, SupportsScatter):
            table.scatter(ids.cpu(), rows.reshape(ids.numel(), *table.shape[1:]))
        else:
            raise TypeError(f"{key} is backed by {type(table).__name__}, which cannot be written")

    def update_tensor(self, tensor, *args, **kwargs) -> bool:
        """With an index on an existing attribute: write those rows, keep the rest. Else PyG's default
        (remove, then put)."""
        attr = self._tensor_attr_cls.cast(*args, **kwargs)
        if attr.is_set("index") and not _is_whole(attr.index) and self._key(attr) in self._tables:
            return self.put_tensor(tensor, attr)
        return super().update_tensor(tensor, attr)

    def _drop(self, key: tuple) -> bool:
        owned = self._owned.pop(key, None)
        if owned is not None and os.getpid() == self._made_in:  # a file this store made: it goes with the attribute
            owned.close()
            os.unlink(owned.path)
        return self._tables.pop(key, None) is not None

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._drop(self._key(attr))

    def close(self) -> None:
        """Close the TensorFiles this store created (they stay on disk)."""
        for tf in self._owned.values():
            tf.close()

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _owned={})  # the receiver's copy owns no file (see the module docstring)

    # -- get -----------------------------------------------------------------------------------------
    def _get_tensor(self, attr: TensorAttr):
        return self._start_get(attr)()

    def _start_get(self, attr: TensorAttr):
        """Start reading `attr`'s rows; returns a function that finishes and returns them."""
        table = self._table(attr)
        whole = _is_whole(attr.index)
        if whole and isinstance(table, torch.Tensor):
            return lambda: table
        ids, lead = (torch.arange(table.shape[0]), None) if whole else row_ids(attr.index, table.shape[0])
        if isinstance(table, torch.Tensor):
            rows = table[ids.to(table.device)]
            fetch = lambda: rows  # noqa: E731
        elif isinstance(table, SupportsPrefetch):
            fetch = table.prefetch(ids).wait
        else:
            rows = table.gather(ids)
            fetch = lambda: rows  # noqa: E731

        def finish():
            out = fetch()
            if whole:
                return out
            return out[0] if lead is None else out.reshape(*lead, *table.shape[1:])
        return finish

    def _multi_get_tensor(self, attrs):
        # Submit every gpuio read first (they proceed together), then collect.
        pending = [self._start_get(attr) for attr in attrs]
        return [finish() for finish in pending]

    def _get_tensor_size(self, attr: TensorAttr):
        table = self._tables.get(self._key(attr))
        if table is None:
            return None
        if _is_whole(attr.index):
            return tuple(table.shape)
        _, lead = row_ids(attr.index, table.shape[0])
        return (*(lead or ()), *table.shape[1:])

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """Every (group_name, attr_name) put into the store, as TensorAttrs."""
        return [TensorAttr(group_name=g, attr_name=a) for g, a in self._tables]

__all__ = ["PygFeatureStore"]
