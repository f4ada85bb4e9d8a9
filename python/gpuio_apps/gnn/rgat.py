"""RGAT (relational graph attention) for heterogeneous node classification, as IGBH's RGAT baseline: per
layer, one GATConv per relation (PyG `HeteroConv`, messages of all relations into a type summed) plus a
per-type linear self connection; a final linear layer on the target type. A layer computes only the types
the target's logits depend on (`needed_types`; the last layer: the target alone, like DGL's blocks). Training
and evaluation loops over a `HeteroBatchLoader`, timed like the homogeneous ones (gpuio_apps.gnn.train)."""
from __future__ import annotations

import time
import warnings

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, HeteroConv

from gpuio_apps.gnn.train import train_epoch


def needed_types(edge_types, target: str, num_layers: int) -> list:
    """Per layer (first to last), the node types whose outputs reach the target's logits: the last layer's
    are the target's alone; a layer below it needs the types the layer above reads (its relations' sources and
    its own types, through the self connection). Outputs outside these would be computed and thrown away, and
    their parameters would get no gradient (DistributedDataParallel would then have to search for them)."""
    out = [{target}]
    for _ in range(num_layers - 1):
        above = out[0]
        out.insert(0, above | {et[0] for et in edge_types if et[2] in above})
    return out


class RGAT(torch.nn.Module):
    def __init__(self, edge_types, in_dims: dict, hidden: int = 128, out_dim: int = 19, num_layers: int = 2,
                 heads: int = 4, dropout: float = 0.2, target: str = "paper"):
        super().__init__()
        if num_layers < 1 or hidden < heads or heads < 1:
            raise ValueError(f"need num_layers >= 1 and hidden >= heads >= 1, got {num_layers}, {hidden}, {heads}")
        edge_types = [tuple(et) for et in edge_types]
        types = sorted({t for et in edge_types for t in (et[0], et[2])})
        missing = [t for t in types if t not in in_dims]
        if missing:
            raise ValueError(f"in_dims has no input width for node types {missing}")
        self.target, self.dropout = target, dropout
        self.convs = torch.nn.ModuleList()
        self.skips = torch.nn.ModuleList()
        d = dict(in_dims)
        width = (hidden // heads) * heads
        for needed in needed_types(edge_types, target, num_layers):
            with warnings.catch_warnings():  # PyG warns of the types no relation here updates: needed_types' aim
                warnings.filterwarnings("ignore", "There exist node types", UserWarning)
                self.convs.append(HeteroConv({et: GATConv((d[et[0]], d[et[2]]), width // heads, heads=heads,
                                                          add_self_loops=False)
                                              for et in edge_types if et[2] in needed}, aggr="sum"))
            self.skips.append(torch.nn.ModuleDict({t: torch.nn.Linear(d[t], width) for t in types if t in needed}))
            d = {t: width for t in types}
        self.out = torch.nn.Linear(width, out_dim)

    def forward(self, x: dict, edge_index: dict) -> torch.Tensor:
        for conv, skip in zip(self.convs, self.skips):
            h = conv(x, edge_index)
            x = {t: F.dropout(F.relu(lin(x[t]) + h[t] if t in h else lin(x[t])), self.dropout, self.training)
                 for t, lin in skip.items() if t in x}
        return self.out(x[self.target])


def make_rgat(edge_types, in_dims: dict, num_classes: int, hidden: int = 128, heads: int = 4, seed: int = 0,
              device="cpu", num_layers: int = 2) -> RGAT:
    torch.manual_seed(seed)  # same seed -> same initial weights for every feature source and rank
    return RGAT(edge_types, in_dims, hidden, num_classes, num_layers, heads).to(device)


def _inputs(batch, dtype=torch.float32):
    return {t: v.to(dtype) for t, v in batch.x.items()}, batch.edge_index


def train_steps(model, loader, optimizer, on_step=None, sync=None, deadline: float | None = None) -> dict:
    """One pass over `loader` (its max_batches bound the steps; past `deadline`, a time.perf_counter, the
    run stops after the step in hand): gpuio_apps.gnn.train.train_epoch on the heterogeneous inputs; losses per
    step, wall (run_s) and compute seconds, steps, loader timings, and step_end_s (seconds from the start
    to the end of each step: runs cut at different steps compare over their common prefix). on_step(batch) runs
    after each step."""
    t0, ends = time.perf_counter(), []

    def after(batch):
        ends.append(time.perf_counter() - t0)
        if on_step is not None:
            on_step(batch)
    r = train_epoch(model, loader, optimizer, on_batch=after, inputs=_inputs, sync=sync, deadline=deadline)
    r["run_s"], r["steps"], r["step_end_s"] = r.pop("epoch_s"), r.pop("batches"), ends
    return r


def load_only(loader, deadline: float | None = None) -> dict:
    """Iterate `loader` with no model: the time of sampling + feature loading alone; past `deadline` (a
    time.perf_counter) it stops after the batch in hand. step_end_s: seconds to the end of each batch."""
    t0, ends = time.perf_counter(), []
    it = iter(loader)
    try:
        for _ in it:
            ends.append(time.perf_counter() - t0)
            if deadline is not None and time.perf_counter() > deadline:
                break
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()  # a generator left early stops its producer
    return dict(run_s=time.perf_counter() - t0, steps=len(ends), step_end_s=ends, **loader.times)


def compute_only(model, batches: list, optimizer) -> dict:
    """Train on batches already in memory: the time of compute alone (same steps, no loading)."""
    model.train()
    t0 = time.perf_counter()
    for batch in batches:
        optimizer.zero_grad()
        x, ei = _inputs(batch)
        loss = F.cross_entropy(model(x, ei)[: batch.batch_size], batch.y)
        loss.backward()
        optimizer.step()
        float(loss.detach())
    return dict(run_s=time.perf_counter() - t0, steps=len(batches))


@torch.no_grad()
def accuracy(model, loader) -> float:
    model.eval()
    correct = total = 0
    for batch in loader:
        x, ei = _inputs(batch)
        pred = model(x, ei)[: batch.batch_size].argmax(1)
        correct += int((pred == batch.y).sum())
        total += batch.batch_size
    return correct / max(total, 1)
