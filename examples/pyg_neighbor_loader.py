"""GraphSAGE on Cora, PyG-style, with the node features read from disk by gpuio.

    python examples/pyg_neighbor_loader.py [--data DIR] [--epochs 10] [--workdir DIR]

What a PyG user writes, with gpuio's stores in place of `Data`:
- features in a `gpuio.TensorFile` (an on-disk .npy read in blocks by gpuio) behind `gpuio.pyg.PygFeatureStore`,
  labels beside them as a tensor; the graph in `gpuio.pyg.GraphStore`;
- `torch_geometric.loader.NodeLoader((feature_store, graph_store), node_sampler=gpuio.pyg.NeighborSampler(...))`
  (a pure-PyTorch sampler, no pyg-lib or torch-sparse needed), and, when pyg-lib or torch-sparse is
  installed, PyG's own `NeighborLoader((feature_store, graph_store), ...)` over the same stores;
- `torch_geometric.nn.GraphSAGE`, trained on the public split, then test accuracy.
Cora is read from its Planetoid raw files (`ind.cora.*`) by `gpuio_apps.data.load_planetoid`.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import tempfile

import torch
import torch.nn.functional as F
import torch_geometric.typing
from torch_geometric.loader import NeighborLoader, NodeLoader
from torch_geometric.nn import GraphSAGE

import gpuio
from gpuio_apps.data import load_planetoid
from gpuio.pyg import GraphStore, NeighborSampler, PygFeatureStore

REPO = pathlib.Path(__file__).resolve().parents[1]
CORA_DIRS = [REPO / "datasets" / "cora", REPO.parent / "shared" / "datasets" / "cora",
             REPO.parent.parent / "shared" / "datasets" / "cora"]


def find_cora(data: str | None) -> pathlib.Path:
    for d in ([pathlib.Path(data)] if data else CORA_DIRS):
        if (d / "ind.cora.x").exists():
            return d
    raise SystemExit(f"Cora's Planetoid files (ind.cora.*) not found in {data or [str(d) for d in CORA_DIRS]}; "
                     f"pass --data DIR")


def build_stores(data, workdir: str):
    """The features go into a TensorFile on disk; PyG's loaders reach them through gpuio's PygFeatureStore."""
    x = data.features.gather(torch.arange(data.num_nodes))
    tf = gpuio.TensorFile.create(os.path.join(workdir, "cora-x.npy"), tuple(x.shape), "float32", overwrite=True)
    tf[:] = x
    feature_store = PygFeatureStore()
    feature_store.put_tensor(tf, group_name=None, attr_name="x", index=None)  # rows read by gpuio
    feature_store.put_tensor(data.y, group_name=None, attr_name="y", index=None)
    graph_store = GraphStore()
    graph_store.put_edge_index(data.edge_index, edge_type=None, layout="coo",
                               size=(data.num_nodes, data.num_nodes))
    return feature_store, graph_store, tf


def node_loaders(stores, data, fanouts, batch_size, seed):
    """(train, test) NodeLoaders over the gpuio stores with gpuio's sampler (no pyg-lib needed)."""
    sampler = NeighborSampler(stores[1], num_neighbors=fanouts, seed=seed)
    return (NodeLoader(stores, node_sampler=sampler, input_nodes=data.train_idx, batch_size=batch_size,
                       shuffle=True),
            NodeLoader(stores, node_sampler=sampler, input_nodes=data.test_idx, batch_size=256))


def neighbor_loaders(stores, data, fanouts, batch_size):
    """(train, test) PyG NeighborLoaders over the same stores (PyG's sampler: needs pyg-lib or torch-sparse)."""
    return (NeighborLoader(stores, num_neighbors=fanouts, input_nodes=data.train_idx, batch_size=batch_size,
                           shuffle=True),
            NeighborLoader(stores, num_neighbors=fanouts, input_nodes=data.test_idx, batch_size=256))


def train(model, loader, optimizer) -> float:
    model.train()
    total, count = 0.0, 0
    for batch in loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        optimizer.step()
        total, count = total + loss.item() * batch.batch_size, count + batch.batch_size
    return total / max(count, 1)


@torch.no_grad()
def test(model, loader) -> float:
    model.eval()
    correct = count = 0
    for batch in loader:
        pred = model(batch.x, batch.edge_index)[:batch.batch_size].argmax(-1)
        correct += int((pred == batch.y[:batch.batch_size]).sum())
        count += batch.batch_size
    return correct / max(count, 1)


def fit(name, loaders, data, args) -> float:
    torch.manual_seed(args.seed)
    model = GraphSAGE(data.num_features, args.hidden, num_layers=len(args.fanouts),
                      out_channels=data.num_classes, dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    for epoch in range(1, args.epochs + 1):
        loss = train(model, loaders[0], optimizer)
        print(f"{name}: epoch {epoch:2d}  loss {loss:.4f}")
    acc = test(model, loaders[1])
    print(f"{name}: test accuracy {acc:.4f} ({data.test_idx.numel()} test nodes)")
    return acc


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="folder with Cora's ind.cora.* files (default: the repository's datasets)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--fanouts", type=int, nargs="+", default=[10, 10], help="neighbours sampled per hop")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", help="where the feature file goes (default: a temporary folder)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.hidden < 1:
        p.error(f"--epochs, --batch-size and --hidden must be >= 1, got {args.epochs}, {args.batch_size}, "
                f"{args.hidden}")
    data = load_planetoid(find_cora(args.data), "cora")
    print(f"{data.name}: {data.num_nodes} nodes, {data.edge_index.shape[1]} edges, {data.num_features} "
          f"features, {data.num_classes} classes; train/test {data.train_idx.numel()}/{data.test_idx.numel()}")
    with tempfile.TemporaryDirectory() as tmp:
        stores_fs, stores_gs, tf = build_stores(data, args.workdir or tmp)
        stores = (stores_fs, stores_gs)
        print(f"features: {tf}")
        results = {"NodeLoader": fit("NodeLoader + gpuio.pyg.NeighborSampler",
                                     node_loaders(stores, data, args.fanouts, args.batch_size, args.seed),
                                     data, args)}
        if torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE:
            results["NeighborLoader"] = fit("NeighborLoader", neighbor_loaders(stores, data, args.fanouts,
                                                                               args.batch_size), data, args)
        else:
            print("NeighborLoader((feature_store, graph_store), ...) needs pyg-lib or torch-sparse, neither "
                  "installed: NodeLoader + gpuio.pyg.NeighborSampler does the same sampling without them")
        results["feature_bytes_read"] = tf.stats()["bytes_read"]
        tf.close()
    return results


if __name__ == "__main__":
    main()
