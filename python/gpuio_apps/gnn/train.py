"""Training and evaluation loops over a `NodeBatchLoader`, timed the same way for every feature source."""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from gpuio_apps.gnn.models import GNN


def make_model(kind: str, in_dim: int, num_classes: int, hidden: int = 64, seed: int = 0, device="cpu") -> GNN:
    torch.manual_seed(seed)  # same seed -> same initial weights for every feature source
    return GNN(kind, in_dim, hidden, num_classes).to(device)


def _homogeneous_inputs(batch):
    return batch.x, batch.edge_index


def train_epoch(model, loader, optimizer, on_batch=None, deadline: float | None = None,
                inputs=_homogeneous_inputs, sync=None) -> dict:
    """One pass over `loader`; returns losses per batch, batches done, epoch and compute seconds, loader
    timings. on_batch(batch) runs after each step; past `deadline` (time.perf_counter) the epoch stops after
    the batch in hand. inputs(batch) -> the model's arguments (default x, edge_index); sync() (e.g.
    torch.cuda.synchronize) runs before the epoch's clock is read."""
    model.train()
    losses, compute_s = [], 0.0
    t_epoch = time.perf_counter()
    for batch in loader:
        t0 = time.perf_counter()
        optimizer.zero_grad()
        out = model(*inputs(batch))[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))  # float() synchronises, so compute_s covers the GPU work too
        compute_s += time.perf_counter() - t0
        if on_batch is not None:
            on_batch(batch)
        if deadline is not None and time.perf_counter() > deadline:
            break  # the loader's generator closes: its worker stops
    if sync is not None:
        sync()
    return dict(losses=losses, batches=len(losses), epoch_s=time.perf_counter() - t_epoch, compute_s=compute_s,
                **loader.times)


@torch.no_grad()
def accuracy(model, loader) -> float:
    model.eval()
    correct = total = 0
    for batch in loader:
        pred = model(batch.x, batch.edge_index)[: batch.batch_size].argmax(1)
        correct += int((pred == batch.y).sum())
        total += batch.batch_size
    return correct / max(total, 1)
