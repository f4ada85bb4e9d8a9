"""gpuio.pyg.PygFeatureStore / GraphStore against PyG's FeatureStore/GraphStore contract.

PyG's own store tests are not in its wheel, so this module states the same contract, read from PyG's
base classes (`torch_geometric/data/feature_store.py`, `graph_store.py`) and its reference stores
(`torch_geometric.testing.MyFeatureStore` / `MyGraphStore`, which the wheel ships). Contract tests run
on PyG's reference store too ("pyg-reference"): an assertion that PyG's own store fails would pin
gpuio's behaviour, not PyG's. gpuio stores run backed by (a) tensors in memory and (b) TensorFiles
(`PygFeatureStore(root=...)`, and a user TensorFile put as a table).

PyG behaviours pinned, per test:
- test_put_get_update_remove: put with an index (the ids the rows belong to) on a NEW attribute; get
  whole / by ids; update_tensor replaces; remove_tensor returns True then False; get after remove raises
  KeyError (FeatureStore.get_tensor's missing-key contract, which MyFeatureStore raises).
- test_views_and_item_access: `store[g, a, idx] = t`, `store[g, a, idx]`, `store[g, a, None]`,
  `store[g, a, :]`, `store[g][a][:]`, `store[g].a[:]`, `store.view().g.a[:]`, partially specified keys
  give AttrViews equal to `store.view(...)`, a called view gets the tensor, over-specifying raises
  AttributeError, `del store[g, a, idx]` then KeyError.
- test_get_by_ids_not_positions: get(index=ids) returns the rows put for those ids (MyFeatureStore
  looks ids up), also when the put index was a permutation.
- test_multi_get_and_missing_keys: multi_get_tensor equals get_tensor per attr; a missing key raises
  KeyError from get_tensor, multi_get_tensor and item access; a not fully specified attr raises ValueError.
- test_custom_tensor_attr_class: a store built with its own TensorAttr class (here: no group name, keys
  are (attr, index)) is put to and read with keys in that class's order.
- test_sizes_and_attrs: get_tensor_size of whole tensors; get_all_tensor_attrs lists (group, attr) pairs.
- test_graph_store_layouts: GraphStore put/get/remove per layout (COO, CSR, CSC) by item access, a
  missing edge type raises KeyError, get_all_edge_attrs; PyG's `[2, E]` edge_index accepted for COO.
- test_graph_store_layout_conversion: GraphStore.coo()/csr()/csc() (PyG's base conversions, with and
  without store=True) give the same edges from each stored layout, and gpuio's sampler CSC agrees.
gpuio behaviours beyond PyG's reference (gpuio stores only; each says why the reference differs):
- test_update_with_index_keeps_other_rows, test_new_attribute_ids_are_dense, test_int_and_nd_indices,
  test_row_tables_and_files (TensorFile/gpuio.TableCache tables, writes reaching the file, owned files
  removed with their attribute, get_tensor_size None when missing).
- test_half_precision_features_bit_exact (every store, the reference too): bfloat16/float16 put and read
  bit for bit; test_rows_written_into_bfloat16_features_are_cast, test_store_dtype_option_* (gpuio stores):
  rows of another dtype cast as torch casts, `PygFeatureStore(dtype=...)` in any spelling, bad ones refused.
"""
import numpy as np
import pytest
import torch
from torch_geometric.data import TensorAttr
from torch_geometric.data.feature_store import AttrView, _FieldStatus
from torch_geometric.testing import MyFeatureStore, MyGraphStore

import gpuio.pyg as gp
from gpuio.cache import TableCache as CacheStore
from gpuio.tensor import TensorFile

FEATURE_STORES = ["pyg-reference", "gpuio-memory", "gpuio-tensorfile"]
GPUIO_STORES = FEATURE_STORES[1:]


def make_feature_store(kind, tmp_path):
    if kind == "pyg-reference":
        return MyFeatureStore()
    return gp.PygFeatureStore() if kind == "gpuio-memory" else gp.PygFeatureStore(root=tmp_path / "fs")


@pytest.fixture(params=FEATURE_STORES)
def store(request, tmp_path):
    s = make_feature_store(request.param, tmp_path)
    yield s
    if hasattr(s, "close"):
        s.close()


@pytest.fixture(params=GPUIO_STORES)
def gstore(request, tmp_path):
    s = make_feature_store(request.param, tmp_path)
    yield s
    s.close()


T = torch.tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2]])
IDX = torch.tensor([0, 1, 2])


def test_put_get_update_remove(store):
    attr = TensorAttr("A", "feat", IDX)
    assert TensorAttr("A").update(attr) == attr
    assert store.put_tensor(T, attr)  # a new attribute, put with an index
    assert torch.equal(store.get_tensor(attr), T)
    assert torch.equal(store.get_tensor("A", "feat", index=torch.tensor([0, 2])), T[[0, 2]])
    assert store.update_tensor(T + 1, attr)
    assert torch.equal(store.get_tensor(attr), T + 1)
    assert store.remove_tensor(attr)
    assert not store.remove_tensor(attr)
    with pytest.raises(KeyError):
        store.get_tensor(attr)
    assert store.put_tensor(T, "A", "feat", None)  # put back whole after removal
    assert torch.equal(store.get_tensor("A", "feat", None), T)


def test_views_and_item_access(store):
    view = store.view(group_name="A")
    view.attr_name = "feat"
    view["index"] = IDX
    assert view != "not an AttrView"
    assert view == AttrView(store, TensorAttr("A", "feat", IDX))

    store["A", "feat", IDX] = T
    for got in (store["A", "feat", IDX], store["A", "feat", None], store["A", "feat", :],
                store["A"]["feat"][:], store["A"].feat[:], store.view().A.feat[:]):
        assert torch.equal(got, T)
    with pytest.raises(AttributeError):
        store.view(group_name="A", index=None).feat.A
    assert store["A"] == store.view(TensorAttr(group_name="A"))
    assert store["A"].feat == store.view(TensorAttr(group_name="A", attr_name="feat"))
    assert isinstance(store["A", "feat"], AttrView)
    assert torch.equal(store["A", "feat"](), T)  # a called view gets the (unindexed) tensor

    del store["A", "feat", IDX]
    with pytest.raises(KeyError):
        store["A", "feat", IDX]


def test_get_by_ids_not_positions(store):
    perm = torch.tensor([2, 0, 1])  # row i of the put tensor belongs to id perm[i]
    store.put_tensor(T, "A", "feat", perm)
    for ids in (torch.tensor([0]), torch.tensor([1, 2]), torch.tensor([2, 0, 1]), torch.zeros(0, dtype=int)):
        want = T[torch.argsort(perm)][ids]
        assert torch.equal(store.get_tensor("A", "feat", ids), want), ids


def test_multi_get_and_missing_keys(store):
    store.put_tensor(T, "A", "feat", IDX)
    store.put_tensor(T * 10, "B", "feat", IDX)
    attrs = [TensorAttr("A", "feat", torch.tensor([1, 0])), TensorAttr("B", "feat", torch.tensor([2]))]
    got = store.multi_get_tensor(attrs)
    assert len(got) == 2 and all(torch.equal(g, store.get_tensor(a)) for g, a in zip(got, attrs))
    missing = TensorAttr("C", "feat", IDX)
    with pytest.raises(KeyError):
        store.get_tensor(missing)
    with pytest.raises(KeyError):
        store.multi_get_tensor([attrs[0], missing])
    with pytest.raises(KeyError):
        store["A", "nope", IDX]
    with pytest.raises(ValueError, match="fully"):
        store.get_tensor(TensorAttr("A"))


class AttrNoGroup(TensorAttr):
    """Keys are (attr_name, index); group_name is always None."""

    def __init__(self, attr_name=_FieldStatus.UNSET, index=_FieldStatus.UNSET):
        super().__init__(None, attr_name, index)


@pytest.mark.parametrize("kind", FEATURE_STORES)
def test_custom_tensor_attr_class(kind, tmp_path):
    if kind == "pyg-reference":
        store = MyFeatureStore()
        store._tensor_attr_cls = AttrNoGroup
    else:
        store = gp.PygFeatureStore(root=tmp_path / "fs" if kind == "gpuio-tensorfile" else None,
                                tensor_attr_cls=AttrNoGroup)
    store["feat", IDX] = T
    assert isinstance(store["feat"], AttrView)
    for got in (store["feat", IDX], store["feat"][IDX], store["feat"][:], store["feat", :]):
        assert torch.equal(got, T)
    assert torch.equal(store.get_tensor("feat", torch.tensor([2])), T[[2]])
    if hasattr(store, "close"):
        store.close()


def test_sizes_and_attrs(store):
    store.put_tensor(T, "A", "feat", IDX)
    store.put_tensor(torch.zeros(3, 5), "B", "emb", IDX)
    assert tuple(store.get_tensor_size("A", "feat")) == (3, 3)
    assert tuple(store.get_tensor_size(TensorAttr("B", "emb"))) == (3, 5)
    assert {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()} == {("A", "feat"), ("B", "emb")}
    store.remove_tensor("B", "emb", None)
    assert [(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()] == [("A", "feat")]


# -- gpuio behaviours beyond PyG's reference store ----------------------------------------------------

def test_update_with_index_keeps_other_rows(gstore):
    """PyG's default update (remove, then put) would leave only the updated ids; a row table keeps the rest."""
    gstore.put_tensor(T.clone(), "A", "feat", None)  # a memory store keeps the tensor itself, as Data does
    assert gstore.update_tensor(torch.full((1, 3), 9), "A", "feat", torch.tensor([1]))
    assert torch.equal(gstore.get_tensor("A", "feat", None), torch.tensor([[0, 0, 0], [9, 9, 9], [2, 2, 2]]))
    gstore.put_tensor(torch.full((2, 3), 7), "A", "feat", torch.tensor([2, 0]))  # put on an existing one
    assert torch.equal(gstore["A", "feat", :], torch.tensor([[7, 7, 7], [9, 9, 9], [7, 7, 7]]))
    assert gstore.update_tensor(T * 2, "A", "feat", None)  # whole: replaced
    assert torch.equal(gstore["A", "feat", None], T * 2)
    with pytest.raises(IndexError, match="out of range"):
        gstore.put_tensor(torch.zeros(1, 3), "A", "feat", torch.tensor([3]))
    with pytest.raises(ValueError, match="rows of shape"):
        gstore.put_tensor(torch.zeros(2, 3), "A", "feat", torch.tensor([0]))


def test_new_attribute_ids_are_dense(gstore):
    """gpuio tables are dense by id (the reference keeps only the ids put): unnamed ids read as zeros."""
    gstore.put_tensor(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "n", "x", torch.tensor([4, 1]))
    assert tuple(gstore.get_tensor_size("n", "x")) == (5, 2)
    assert torch.equal(gstore["n", "x", None], torch.tensor([[0.0, 0], [3, 4], [0, 0], [0, 0], [1, 2]]))
    gstore.put_tensor(torch.ones(2, 2), "n", "y", slice(3, None))
    assert torch.equal(gstore["n", "y", :], torch.tensor([[0.0, 0], [0, 0], [0, 0], [1, 1], [1, 1]]))
    gstore.put_tensor(torch.tensor([5, 6]), "n", "z", 2)  # an int index names one row
    assert torch.equal(gstore["n", "z", None], torch.tensor([[0, 0], [0, 0], [5, 6]]))
    with pytest.raises(ValueError, match="ids, which are >= 0"):
        gstore.put_tensor(torch.ones(1, 2), "n", "w", torch.tensor([-1]))
    with pytest.raises(TypeError, match="integer ids"):
        gstore.put_tensor(torch.ones(1, 2), "n", "w", torch.tensor([0.0]))


def test_int_and_nd_indices(gstore):
    """The reference store takes 1-D tensors only; gpuio indexes like torch (int, n-D, negative, mask)."""
    x = torch.randn(6, 4)
    gstore.put_tensor(x, None, "x", None)
    # (no ndarray index: PyG's TensorAttr.is_set compares the index with `!=`, which an array refuses)
    for index in (3, -1, torch.tensor([[0, 5], [2, 2]]), slice(1, 5, 2), [0, -2], torch.arange(6) > 3):
        assert torch.equal(gstore.get_tensor(None, "x", index), x[index]), index
        assert tuple(gstore.get_tensor_size(None, "x", index)) == tuple(x[index].shape)
    gstore.put_tensor(torch.zeros(2, 2, 4), None, "x", torch.tensor([[0, 1], [2, 3]]))
    assert torch.equal(gstore[None, "x", :4], torch.zeros(4, 4))
    assert gstore.get_tensor_size(None, "missing") is None


def test_row_tables_and_files(tmp_path):
    x = torch.randn(50, 8)
    tf = TensorFile.create(tmp_path / "x.npy", x.shape, "float32")
    tf[:] = x
    fs = gp.PygFeatureStore(root=tmp_path / "owned")
    fs.put_tensor(tf, None, "x", None)
    fs.put_tensor(CacheStore(tf, gpu_cache_bytes=4 * 4096, device="cpu"), None, "cached", None)
    ids = torch.tensor([[3, 49], [0, 3]])
    assert torch.equal(fs[None, "x", ids], x[ids]) and torch.equal(fs[None, "cached", ids], x[ids])
    both = fs.multi_get_tensor([TensorAttr(None, "x", ids[0]), TensorAttr(None, "cached", 7)])
    assert torch.equal(both[0], x[ids[0]]) and torch.equal(both[1], x[7])
    fs.update_tensor(torch.ones(2, 8), None, "x", torch.tensor([1, 2]))  # writes reach the user's file
    assert np.array_equal(np.load(tmp_path / "x.npy", mmap_mode="r")[1:3], np.ones((2, 8), np.float32))
    with pytest.raises(TypeError, match="cannot be written"):
        fs.update_tensor(torch.ones(1, 8), None, "cached", torch.tensor([0]))
    with pytest.raises(ValueError, match="whole"):
        fs.put_tensor(tf, None, "x2", torch.tensor([0]))
    fs.put_tensor(torch.arange(50) % 3, None, "y", None)  # a tensor put into a root store: a new file
    owned = sorted(p.name for p in (tmp_path / "owned").iterdir())
    assert len(owned) == 1 and np.array_equal(np.load(tmp_path / "owned" / owned[0]), np.arange(50) % 3)
    assert fs.remove_tensor(None, "y", None) and not any((tmp_path / "owned").iterdir())  # owned: deleted
    assert fs.remove_tensor(None, "x", None) and (tmp_path / "x.npy").exists()  # the user's: kept
    fs.close()
    tf.close()


# -- element types: bfloat16 and float16 features, the store's dtype option --------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_features_bit_exact(store, dtype):
    """Put whole and read by ids, bit for bit (random 16-bit words, compared as int16), in every store."""
    bits = torch.from_numpy(np.random.default_rng(3).integers(-32768, 32768, (40, 16), dtype=np.int16))
    store.put_tensor(bits.view(dtype), group_name="paper", attr_name="x", index=None)
    ids = torch.tensor([5, 0, 5, 39])
    got = store.get_tensor(group_name="paper", attr_name="x", index=ids)
    assert got.dtype == dtype and torch.equal(got.view(torch.int16), bits[ids])
    whole = store.get_tensor(group_name="paper", attr_name="x", index=None)
    assert torch.equal(whole.view(torch.int16), bits)


@pytest.mark.parametrize("kind", GPUIO_STORES)
def test_rows_written_into_bfloat16_features_are_cast(kind, tmp_path):
    fs = make_feature_store(kind, tmp_path)
    x = torch.randn(30, 8, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    fs.put_tensor(x, None, "x", None)
    new = torch.randn(2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    fs.update_tensor(new, None, "x", torch.tensor([7, 2]))  # float64 rows into bfloat16: cast as torch does
    x[torch.tensor([7, 2])] = new.to(torch.bfloat16)
    assert torch.equal(fs.get_tensor(None, "x", None).view(torch.int16), x.view(torch.int16))
    if kind == "gpuio-tensorfile":  # on disk: a bfloat16 TensorFile, np.load gives its uint16 words
        (path,) = (tmp_path / "fs").iterdir()
        assert np.array_equal(np.load(path).view(np.int16), x.view(torch.int16).numpy())
    fs.close()


@pytest.mark.parametrize("spelling", [torch.bfloat16, "bfloat16", "torch.bfloat16"], ids=repr)
@pytest.mark.parametrize("kind", GPUIO_STORES)
def test_store_dtype_option_casts_new_tables(kind, tmp_path, spelling):
    root = None if kind == "gpuio-memory" else tmp_path / "fs"
    fs = gp.PygFeatureStore(root=root, dtype=spelling)
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(6))
    fs.put_tensor(x, None, "x", None)
    fs.put_tensor(x[:3], None, "part", torch.tensor([4, 1, 9]))  # a new table from some ids: cast too
    got = fs.get_tensor(None, "x", torch.arange(20))
    assert got.dtype == torch.bfloat16 and torch.equal(got, x.to(torch.bfloat16))
    part = fs.get_tensor(None, "part", torch.tensor([4, 1, 9, 0]))
    assert part.dtype == torch.bfloat16 and torch.equal(part[:3], x[:3].to(torch.bfloat16)) and not part[3].any()
    fs.close()
    f16 = gp.PygFeatureStore(dtype=np.float16)
    f16.put_tensor(x, None, "x", None)
    assert f16.get_tensor(None, "x", None).dtype == torch.float16


def test_store_dtype_option_refuses_bad_dtypes_by_name():
    for bad in ("float8", "torch.nope", object):
        with pytest.raises(TypeError, match="PygFeatureStore dtype") as ei:
            gp.PygFeatureStore(dtype=bad)
        assert repr(bad) in str(ei.value) and "\n" not in str(ei.value)


# -- GraphStore ----------------------------------------------------------------------------------------

@pytest.fixture(params=["pyg-reference", "gpuio"])
def graph_store(request):
    return MyGraphStore() if request.param == "pyg-reference" else gp.GraphStore()


def test_graph_store_layouts(graph_store):
    coo = torch.tensor([0, 1]), torch.tensor([1, 2])
    csr = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2])
    csc = torch.tensor([0, 1]), torch.tensor([0, 0, 1, 2])
    graph_store["edge", "coo"] = coo
    graph_store["edge", "csr"] = csr
    graph_store["edge", "csc"] = csc
    for layout, (a, b) in (("coo", coo), ("csr", csr), ("csc", csc)):
        got = graph_store["edge", layout]
        assert torch.equal(got[0], a) and torch.equal(got[1], b), layout
    assert len(graph_store.get_all_edge_attrs()) == 3
    del graph_store["edge", "coo"]
    with pytest.raises(KeyError):
        graph_store["edge", "coo"]
    with pytest.raises(KeyError):
        graph_store["other", "csr"]
    edge_index = torch.tensor([[0, 1, 1], [1, 0, 2]])  # PyG's [2, E] form
    graph_store.put_edge_index(edge_index, edge_type=("n", "to", "n"), layout="coo", size=(3, 3))
    got = graph_store.get_edge_index(("n", "to", "n"), "coo", size=(3, 3))
    assert torch.equal(got[0], edge_index[0]) and torch.equal(got[1], edge_index[1])
    assert graph_store.remove_edge_index(("n", "to", "n"), "coo", size=(3, 3))


def test_graph_store_rejects_malformed_edge_index():
    gs = gp.GraphStore()
    for bad in (torch.zeros(3, 4, dtype=torch.long), [torch.zeros(2)], torch.zeros(5, dtype=torch.long)):
        with pytest.raises(TypeError, match=r"\[2, E\] tensor or a pair"):
            gs.put_edge_index(bad, edge_type=None, layout="coo")


def _layouts(n=12, e=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    key = torch.unique(torch.randint(n * n, (e,), generator=g))  # distinct edges, sorted by (row, col)
    row, col = key // n, key % n
    rowptr = torch.cumsum(torch.bincount(row, minlength=n), 0)
    by_col = torch.argsort(col * n + row)
    colptr = torch.cumsum(torch.bincount(col, minlength=n), 0)
    zero = torch.zeros(1, dtype=torch.long)
    return n, (row, col), (torch.cat([zero, rowptr]), col), (row[by_col], torch.cat([zero, colptr]))


def _edge_set(row, col):
    return sorted(zip(row.tolist(), col.tolist()))


def test_graph_store_layout_conversion(graph_store):
    n, coo, csr, csc = _layouts()
    graph_store.put_edge_index(torch.stack(coo) if isinstance(graph_store, gp.GraphStore) else coo,
                               ("v", "1", "v"), "coo", size=(n, n))
    graph_store.put_edge_index(csr, ("v", "2", "v"), "csr", size=(n, n))
    graph_store.put_edge_index(csc, ("v", "3", "v"), "csc", size=(n, n))
    want = _edge_set(*coo)
    rows, cols, perms = graph_store.coo()
    assert len(rows) == 3 and all(_edge_set(rows[t], cols[t]) == want for t in rows)
    rows, cols, _ = graph_store.csr()
    assert all(torch.equal(rows[t], csr[0]) for t in rows)  # rowptr is layout-independent
    rows, cols, _ = graph_store.csc()
    assert all(torch.equal(cols[t], csc[1]) for t in cols)
    with pytest.raises(ValueError, match="not found"):
        graph_store.coo([("v", "4", "v")])
    graph_store.csr(store=True)
    assert len(graph_store.get_all_edge_attrs()) == 5  # CSR added for the COO and CSC types
    if isinstance(graph_store, gp.GraphStore):  # the sampler's CSC, from each stored layout
        for t in (("v", "1", "v"), ("v", "2", "v"), ("v", "3", "v")):
            c = graph_store.gpuio_csc(t)
            assert torch.equal(c.colptr, csc[1]) and _edge_set(c.row, torch.repeat_interleave(
                torch.arange(n), c.colptr[1:] - c.colptr[:-1])) == want, t
