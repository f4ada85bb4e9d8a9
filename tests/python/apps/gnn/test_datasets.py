"""The Planetoid datasets ship in the repository (datasets/), so the tests that train on them run in any
clone instead of skipping."""
from __future__ import annotations

import os

import pytest

from gpuio_apps.data import find_dataset, load_planetoid
from repo_scripts import ROOT


@pytest.mark.parametrize("name,nodes,features,classes,train", [("cora", 2708, 1433, 7, 140),
                                                                ("citeseer", 3327, 3703, 6, 120)])
def test_planetoid_from_the_repository(name, nodes, features, classes, train):
    folder = find_dataset(name)
    assert os.path.samefile(folder, ROOT / "datasets" / name)  # found in the clone itself
    data = load_planetoid(folder, name)
    assert (data.num_nodes, data.num_features, data.num_classes) == (nodes, features, classes)
    assert len(data.train_idx) == train and len(data.val_idx) == 500
    assert 990 <= len(data.test_idx) <= 1000  # CiteSeer's isolated test ids have no row and leave the split
    assert data.edge_index.shape[0] == 2 and int(data.edge_index.max()) < nodes


def test_missing_dataset_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUIO_DATASETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="'nosuch' not found .*datasets/nosuch.*GPUIO_DATASETS"):
        find_dataset("nosuch")
    (tmp_path / "mine").mkdir()
    assert find_dataset("mine") == str(tmp_path / "mine")
