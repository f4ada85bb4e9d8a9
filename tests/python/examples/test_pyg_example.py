"""Smoke test of examples/pyg_neighbor_loader.py (PyG's NodeLoader over gpuio stores, GraphSAGE): on a tiny
Planetoid-format dataset written here (runs in any clone), and on Cora when its files are present."""
import pickle

import numpy as np
import pytest

from repo_scripts import load_script

sp = pytest.importorskip("scipy.sparse")  # the pyg extra's; a GPU machine's pytest -m gpu collects this file too

N, C, F, TRAIN, TEST = 700, 3, 12, 45, 100  # load_planetoid's split needs TRAIN + 500 val + TEST nodes


def write_planetoid(folder, name="cora", seed=0):
    """Planetoid raw files (ind.<name>.*) of a graph whose classes are separable by features and edges."""
    rng = np.random.default_rng(seed)
    label = np.arange(N) % C
    x = rng.random((N, F)) * 0.5
    x[np.arange(N), label * (F // C)] += 2.0
    onehot = np.eye(C)[label]
    test_ids = rng.permutation(np.arange(N - TEST, N))  # test.index lists tx's rows in file order
    graph = {i: [int(j) for j in rng.choice(np.flatnonzero(label == label[i]), 3)] for i in range(N)}
    parts = dict(x=sp.csr_matrix(x[:TRAIN]), y=onehot[:TRAIN], allx=sp.csr_matrix(x[:N - TEST]),
                 ally=onehot[:N - TEST], tx=sp.csr_matrix(x[test_ids]), ty=onehot[test_ids], graph=graph)
    folder.mkdir(parents=True, exist_ok=True)
    for part, obj in parts.items():
        with open(folder / f"ind.{name}.{part}", "wb") as f:
            pickle.dump(obj, f)
    np.savetxt(folder / f"ind.{name}.test.index", test_ids, fmt="%d")
    return folder


@pytest.fixture(scope="module")
def example():
    return load_script("examples/pyg_neighbor_loader.py")


def test_example_learns_on_a_tiny_planetoid_graph(example, tmp_path, capsys):
    data = write_planetoid(tmp_path / "tiny")
    res = example.main(["--data", str(data), "--epochs", "3", "--hidden", "16", "--fanouts", "5", "5",
                        "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert res["NodeLoader"] > 0.9, out  # separable classes: a learning model gets them nearly all
    assert res["feature_bytes_read"] > 0  # the features came from the TensorFile through gpuio
    assert "test accuracy" in out and ("NeighborLoader" in res or "needs pyg-lib or torch-sparse" in out)
    assert (tmp_path / "cora-x.npy").exists()
    example.main(["--data", str(data), "--epochs", "1", "--workdir", str(tmp_path)])  # reruns replace it


def test_example_on_cora(example):
    try:
        cora = example.find_cora(None)
    except SystemExit as e:
        pytest.skip(str(e))
    res = example.main(["--data", str(cora), "--epochs", "3"])
    assert res["NodeLoader"] > 0.5  # 7 classes: chance is ~0.14 (10 epochs reach ~0.80)


def test_example_refuses_a_folder_without_cora(example, tmp_path):
    with pytest.raises(SystemExit, match="--data"):
        example.main(["--data", str(tmp_path)])
