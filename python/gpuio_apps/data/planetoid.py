"""Planetoid-format citation graphs (Cora, CiteSeer) from the raw `ind.<name>.*` files, no download.

Files: x/tx/allx are pickled scipy sparse feature matrices (train / test / all labelled-or-not-test
nodes), y/ty/ally one-hot labels, graph a dict node -> neighbour list, test.index the test node ids in
file order. Nodes are allx's rows then tx's; the test rows arrive in test.index order and are put back
at their ids. Public split: train = the first len(y) nodes, val = the next 500, test = test.index.
CiteSeer has test ids with no row (isolated nodes): they get zero features and no label and are left out
of the test split.
"""
from __future__ import annotations

import os
import pickle

import numpy as np
import torch

from gpuio.rows import InMemoryRows
from gpuio.graph.graph_data import GraphData, coalesce_undirected

PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")
# The Planetoid files ship with the repository (datasets/README.md): an installed wheel holds a copy of that
# folder as gpuio_apps/datasets (CMake's install rule); a checkout (the editable install) reads <repo>/datasets.
_HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DATASETS = os.path.join(_HERE, "..", "datasets")
REPO_DATASETS = os.path.join(_HERE, "..", "..", "..", "datasets")


def find_dataset(name: str) -> str:
    """The folder of dataset ``name`` ("cora", "citeseer"): the installed package's gpuio_apps/datasets first,
    then the repository's datasets/, then $GPUIO_DATASETS/<name>. FileNotFoundError names every place
    looked at."""
    places = [os.path.join(PACKAGE_DATASETS, name), os.path.join(REPO_DATASETS, name)]
    if os.environ.get("GPUIO_DATASETS"):
        places.append(os.path.join(os.environ["GPUIO_DATASETS"], name))
    for p in places:
        if os.path.isdir(p):
            return os.path.normpath(p)
    raise FileNotFoundError(f"dataset {name!r} not found in {[os.path.normpath(p) for p in places]} "
                            f"(set GPUIO_DATASETS to a folder holding {name}/)")


def _load(folder, name, part):
    with open(os.path.join(folder, f"ind.{name}.{part}"), "rb") as f:
        obj = pickle.load(f, encoding="latin1")
    return obj.toarray() if hasattr(obj, "toarray") else obj


def load_planetoid(folder, name: str | None = None, normalize: bool = True) -> GraphData:
    """GraphData with features in memory (`InMemoryRows`); write them to a TensorFile for gpuio."""
    folder = os.fspath(folder)
    name = name or os.path.basename(os.path.normpath(folder))
    missing = [p for p in (*PARTS, "test.index") if not os.path.exists(os.path.join(folder, f"ind.{name}.{p}"))]
    if missing:
        raise FileNotFoundError(f"{folder}: no Planetoid files ind.{name}.{{{','.join(missing)}}}")
    y_train = np.asarray(_load(folder, name, "y"))
    tx, ty = np.asarray(_load(folder, name, "tx")), np.asarray(_load(folder, name, "ty"))
    allx, ally = np.asarray(_load(folder, name, "allx")), np.asarray(_load(folder, name, "ally"))
    graph = _load(folder, name, "graph")
    test_ids = np.loadtxt(os.path.join(folder, f"ind.{name}.test.index"), dtype=np.int64).reshape(-1)
    num_nodes = max(allx.shape[0] + tx.shape[0], int(test_ids.max()) + 1, max(graph) + 1)
    x = np.zeros((num_nodes, allx.shape[1]), np.float32)
    labels = np.zeros((num_nodes, ally.shape[1]), np.float32)
    x[: allx.shape[0]], labels[: ally.shape[0]] = allx, ally
    # tx's i-th row is the node test_ids[i] (test.index lists them in tx's row order).
    if tx.shape[0] != test_ids.shape[0] or ty.shape[0] != test_ids.shape[0]:
        raise ValueError(f"{folder}: tx has {tx.shape[0]} rows, ty {ty.shape[0]}, test.index {test_ids.shape[0]}")
    x[test_ids], labels[test_ids] = tx, ty
    if normalize:  # row-normalise bag-of-words counts, as the Planetoid papers do
        x /= np.maximum(x.sum(1, keepdims=True), 1.0)
    src = np.fromiter((u for u, vs in graph.items() for _ in vs), np.int64)
    dst = np.fromiter((v for vs in graph.values() for v in vs), np.int64)
    edge_index = coalesce_undirected(torch.from_numpy(np.stack([src, dst])), num_nodes)
    has_label = labels.sum(1) > 0
    n_train = y_train.shape[0]
    test = torch.from_numpy(np.sort(test_ids[has_label[test_ids]]))
    return GraphData(edge_index, torch.from_numpy(labels.argmax(1)).long(), labels.shape[1],
                     torch.arange(n_train), torch.arange(n_train, n_train + 500), test,
                     InMemoryRows(torch.from_numpy(x)), name=name)

