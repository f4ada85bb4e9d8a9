"""`torch.distributed.checkpoint` storage over gpuio.safetensors: each rank's items in one safetensors file.

    import torch.distributed.checkpoint as dcp
    dcp.save(state_dict, storage_writer=gpuio.safetensors.StorageWriter("ckpt"))
    dcp.load(state_dict, storage_reader=gpuio.safetensors.StorageReader("ckpt"))

Layout of the checkpoint directory: `__{rank}_0.safetensors` per rank (written by gpuio.safetensors.save_file:
pinned staging, O_DIRECT, durable when write_data returns), named by the item's fully qualified name (a shard:
`name@offsets`), non-tensor items (BytesIO) as U8 tensors; and `.metadata` (DCP's Metadata, pickled as
FileSystemWriter does) written by the coordinator under a temporary name, fsynced and renamed last, so a
checkpoint is complete exactly when `.metadata` exists. Works with a process group (gloo, NCCL) or none.
Reading groups the items by file and reads each file's share in one overlapped pass
(gpuio.safetensors.load_file with tensors=), onto the CUDA device the targets live on when they all live on
one, else into host memory.
"""
from __future__ import annotations

import dataclasses
import io
import os
import pickle
import uuid
from typing import Any

import torch
from torch.distributed.checkpoint import StorageReader as _Reader
from torch.distributed.checkpoint import StorageWriter as _Writer
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, StorageMeta
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, SavePlan, SavePlanner, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from ..outputs import fsync_path
from ._open import load_file
from ._save import write_file

METADATA_NAME = ".metadata"
SUFFIX = ".safetensors"


@dataclasses.dataclass(frozen=True)
class StoredItem:
    """Where one DCP item lives: the file (relative to the checkpoint directory) and the tensor name in it."""
    relative_path: str
    name: str
    byte_io: bool


def _name(index: MetadataIndex) -> str:
    """The item's tensor name in its file: the fully qualified name, and a shard's offsets where not all zero."""
    if index.offset is None or not any(index.offset):
        return index.fqn
    return f"{index.fqn}@{','.join(map(str, index.offset))}"


def _done(value: Any) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut


class _Location:
    """The checkpoint directory both sides name (DCP's checkpoint_id)."""

    path: str

    @property
    def checkpoint_id(self) -> str:
        return self.path

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike) -> bool:
        return isinstance(checkpoint_id, (str, os.PathLike))


class StorageWriter(_Location, _Writer):
    """DCP StorageWriter writing through gpuio.safetensors.save_file (module doc). overwrite=False refuses a
    directory that already holds a complete checkpoint."""

    def __init__(self, path: str | os.PathLike, overwrite: bool = True):
        super().__init__()
        self.path = os.fspath(path)
        self.overwrite = overwrite
        self.save_id = uuid.uuid4().hex
        self.rank: int | None = None
        self.use_collectives = True

    def reset(self, checkpoint_id: str | os.PathLike | None = None) -> None:
        if checkpoint_id:
            self.path = os.fspath(checkpoint_id)
        self.save_id = uuid.uuid4().hex

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.rank = kwargs.get("rank")
        self.use_collectives = kwargs.get("use_collectives", True)

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        os.makedirs(self.path, exist_ok=True)
        if not self.overwrite and os.path.exists(os.path.join(self.path, METADATA_NAME)):
            raise FileExistsError(f"{self.path} already holds a checkpoint and overwrite=False")
        if self.rank is not None and not self.use_collectives:
            plan = dataclasses.replace(plan, storage_data=f"__{self.rank}_")
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        return [p if p.storage_data is not None else dataclasses.replace(p, storage_data=f"__{i}_")
                for i, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future:
        rel = f"{plan.storage_data or '__0_'}0{SUFFIX}"
        tensors: dict[str, torch.Tensor] = {}
        results = []
        for item in plan.items:
            data = planner.resolve_data(item)
            name = _name(item.index)
            byte_io = item.type == WriteItemType.BYTE_IO
            if byte_io:
                t = torch.frombuffer(bytearray(data.getbuffer()), dtype=torch.uint8) if data.getbuffer().nbytes \
                    else torch.empty(0, dtype=torch.uint8)
            else:
                t = data.detach()
            tensors[name] = t
            results.append(WriteResult(index=item.index, size_in_bytes=t.numel() * t.element_size(),
                                       storage_data=StoredItem(rel, name, byte_io)))
        write_file(tensors, os.path.join(self.path, rel))  # items may be views of one tensor: no shared check
        return _done(results)

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        metadata.storage_data = {wr.index: wr.storage_data for wrs in results for wr in wrs}
        metadata.storage_meta = self.storage_meta()
        final = METADATA_NAME if self.use_collectives or self.rank is None else f"__{self.rank}{METADATA_NAME}"
        tmp = os.path.join(self.path, final + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(metadata, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, final))
        fsync_path(self.path, directory=True)

    def storage_meta(self) -> StorageMeta | None:
        return StorageMeta(checkpoint_id=self.path, save_id=self.save_id)


def _narrow(t: torch.Tensor, offsets, lengths) -> torch.Tensor:
    for d, (off, n) in enumerate(zip(offsets, lengths)):
        if off != 0 or n != t.shape[d]:
            t = t.narrow(d, off, n)
    return t


def _what_is_there(path: str) -> str:
    """', holding <what the directory holds>' for an error about a directory that is not gpuio's checkpoint."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return ""
    kinds = sorted({os.path.splitext(n)[1] or n for n in names})
    return f"; it holds {len(names)} entries ({', '.join(kinds[:6])})" if names else "; it is empty"


class StorageReader(_Location, _Reader):
    """DCP StorageReader reading what StorageWriter wrote, through gpuio.safetensors.load_file (module doc)."""

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.path = os.fspath(path)
        self.load_id = uuid.uuid4().hex
        self.storage_data: dict = {}

    def reset(self, checkpoint_id: str | os.PathLike | None = None) -> None:
        if checkpoint_id:
            self.path = os.fspath(checkpoint_id)
        self.load_id = uuid.uuid4().hex

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        rank = kwargs.get("rank")
        name = METADATA_NAME if rank is None else f"__{rank}{METADATA_NAME}"
        path = os.path.join(self.path, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{self.path}: no {name}; not a complete checkpoint{_what_is_there(self.path)}")
        try:
            with open(path, "rb") as f:
                metadata = pickle.load(f)
        except Exception as e:
            raise ValueError(f"{path}: not DCP metadata ({type(e).__name__}: {e})") from None
        foreign = {type(v).__name__ for v in (getattr(metadata, "storage_data", None) or {}).values()
                   if not isinstance(v, StoredItem)}
        if not isinstance(metadata, Metadata) or foreign:
            raise ValueError(f"{self.path}: a checkpoint written by another storage writer (its items are "
                             f"{', '.join(sorted(foreign)) or type(metadata).__name__}"
                             f"{_what_is_there(self.path)}), not by gpuio.safetensors.StorageWriter; read it "
                             f"with its own reader (torch.distributed.checkpoint.FileSystemReader for .distcp files)")
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if metadata.storage_data is None:
            raise ValueError(f"{self.path}: the checkpoint's metadata has no storage_data")
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        per_file: dict[str, list] = {}
        for req in plan.items:
            per_file.setdefault(self.storage_data[req.storage_index].relative_path, []).append(req)
        for rel, reqs in per_file.items():
            targets = {id(r): planner.resolve_tensor(r).detach() for r in reqs if r.type != LoadItemType.BYTE_IO}
            devices = {t.device for t in targets.values()}
            device = devices.pop() if len(devices) == 1 and next(iter(devices)).type == "cuda" else "cpu"
            names = list(dict.fromkeys(self.storage_data[r.storage_index].name for r in reqs))
            loaded = load_file(os.path.join(self.path, rel), device=device, tensors=names)
            for r in reqs:
                t = loaded[self.storage_data[r.storage_index].name]
                if r.type == LoadItemType.BYTE_IO:
                    planner.load_bytes(r, io.BytesIO(t.cpu().numpy().tobytes()))
                    continue
                src = _narrow(t, r.storage_offsets, r.lengths)
                target = targets[id(r)]
                if target.size() != src.size():
                    raise ValueError(f"{rel}: item {r.storage_index.fqn!r} is {tuple(src.size())} in the "
                                     f"checkpoint, the target is {tuple(target.size())}")
                target.copy_(src)
                planner.commit_tensor(r, target)
        return _done(None)

__all__ = ["METADATA_NAME", "SUFFIX", "StoredItem", "StorageWriter", "StorageReader"]
