"""gpuio.safetensors on the CPU: files written by `safetensors` load bit-exact (every dtype, empty and 0-d
tensors, metadata, sharded indexes, lists), round trips, safe_open/get_slice, bad files refused in one line,
and both data paths (page cache, O_DIRECT) taken and reported."""
from __future__ import annotations

import json
import os
import struct

import pytest
import torch

import gpuio
from gpuio import outputs
import gpuio.safetensors as gst

sft = pytest.importorskip("safetensors.torch")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(_bits(a[k]), _bits(b[k])) for k in a)


def every_dtype() -> dict[str, torch.Tensor]:
    """One tensor of each dtype safetensors' torch side stores, plus empty and 0-d ones, odd sizes (unaligned)."""
    g = torch.Generator().manual_seed(0)
    out = {"f32": torch.randn(33, 7, generator=g), "f64": torch.randn(5, generator=g).double(),
           "f16": torch.randn(9, generator=g).half(), "bf16": torch.randn(3, 11, generator=g).bfloat16(),
           "i64": torch.arange(-5, 6), "i32": torch.arange(7, dtype=torch.int32), "i16": torch.arange(3, dtype=torch.int16),
           "i8": torch.tensor([-1, 2, -3], dtype=torch.int8), "u8": torch.arange(13, dtype=torch.uint8),
           "bool": torch.tensor([True, False, True]), "c64": torch.randn(4, dtype=torch.complex64, generator=g),
           "scalar": torch.tensor(2.5), "scalar_i": torch.tensor(7), "empty": torch.empty(0, 4),
           "empty_bf16": torch.empty(3, 0, dtype=torch.bfloat16)}
    raw = torch.randint(0, 256, (5, 6), dtype=torch.uint8, generator=g)
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
                 "float4_e2m1fn_x2"):
        if hasattr(torch, name):
            out[name] = raw.clone().view(getattr(torch, name))
    for name in ("uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            out[name] = torch.arange(6, dtype=torch.int64).to(getattr(torch, name))
    return out


# safetensors.torch.load (bytes in memory) has no table entry for these (its load_file reads them)
NOT_IN_SFT_LOAD = ("float4_e2m1fn_x2", "float8_e8m0fnu")



def test_every_dtype_written_by_safetensors_loads(tmp_path):
    t = every_dtype()
    p = tmp_path / "all.safetensors"
    sft.save_file(t, p, metadata={"format": "pt", "note": "x"})
    assert same(gst.load_file(p), sft.load_file(p))
    assert same(gst.load_file(p), t)
    with gst.safe_open(p, framework="pt") as f:
        assert f.metadata() == {"format": "pt", "note": "x"}
        assert f.keys() == sorted(t)
        for k in t:
            assert same({k: f.get_tensor(k)}, {k: t[k]})
    assert gst.load_file(p)["scalar"].shape == () and gst.load_file(p)["empty"].shape == (0, 4)


def test_round_trip_and_peers_read_our_files(tmp_path):
    t = every_dtype()
    p = tmp_path / "ours.safetensors"
    st: dict = {}
    gst.save_file(t, p, metadata={"k": "v"}, stats=st)
    assert st["bytes"] == os.path.getsize(p) and st["data_path"].startswith("cpu ->")
    header_len = struct.unpack("<Q", p.read_bytes()[:8])[0]
    assert (8 + header_len) % 4096 == 0  # the data starts block-aligned
    assert same(sft.load_file(p), t) and same(gst.load_file(p), t)
    assert same(gst.load(p.read_bytes()), t)
    known = {k: v for k, v in t.items() if k not in NOT_IN_SFT_LOAD}
    gst.save_file(known, p)
    assert same(sft.load(p.read_bytes()), known)
    assert not [n for n in os.listdir(tmp_path) if outputs.TEMP_TAG in n]  # no temporary left behind


def test_load_from_bytes_and_layout():
    t = {k: v for k, v in every_dtype().items() if k not in NOT_IN_SFT_LOAD}
    data = sft.save(t)
    assert same(gst.load(data), t)
    buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    assert same(gst.load(buf), t)  # views of the caller's buffer
    header, order = gst.layout(t, {"a": "b"})
    assert len(header) % 4096 == 0 and [n for n, _ in order] and {n for n, _ in order} == set(t)
    body = b"".join(bytes(gst.tensor_bytes(x).numpy()) for _, x in order)
    assert same(sft.load(header + body), t)


def test_save_replaces_atomically_and_refuses_non_regular(tmp_path):
    p = tmp_path / "m.safetensors"
    gst.save_file({"x": torch.full((50_000,), 7.0)}, p)
    os.chmod(p, 0o600)
    gst.save_file({"y": torch.arange(3)}, p)
    assert same(sft.load_file(p), {"y": torch.arange(3)}) and (os.stat(p).st_mode & 0o777) == 0o600
    link = tmp_path / "link.safetensors"
    os.symlink(p, link)
    gst.save_file({"z": torch.ones(2)}, link)  # through the link: its target is replaced, the link stays
    assert os.path.islink(link) and same(sft.load_file(p), {"z": torch.ones(2)})
    d = tmp_path / "dir.safetensors"
    d.mkdir()
    with pytest.raises(ValueError, match="dir.safetensors: exists and is not a regular file"):
        gst.save_file({"z": torch.ones(2)}, d)
    with pytest.raises(TypeError, match=r"tensors\['n'\] is a int"):
        gst.save_file({"n": 3}, tmp_path / "n.safetensors")
    with pytest.raises(ValueError, match="complex128 has no safetensors name"):
        gst.save_file({"c": torch.zeros(2, dtype=torch.complex128)}, tmp_path / "c.safetensors")
    assert sorted(os.listdir(tmp_path)) == ["dir.safetensors", "link.safetensors", "m.safetensors"]


def test_sharded_index_list_directory_and_filter(tmp_path):
    t = every_dtype()
    names = sorted(t)
    shards = {"model-00001-of-00002.safetensors": names[:7], "model-00002-of-00002.safetensors": names[7:]}
    for fname, ns in shards.items():
        sft.save_file({n: t[n] for n in ns}, tmp_path / fname)
    index = {"metadata": {"total_size": 123}, "weight_map": {n: f for f, ns in shards.items() for n in ns}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    idx = tmp_path / "model.safetensors.index.json"
    assert same(gst.load_file(idx), t) and same(gst.load_file(tmp_path), t)
    assert same(gst.load_file([tmp_path / f for f in shards]), t)
    half = gst.load_file(idx, tensors=lambda n: names.index(n) % 2 == 0)  # a tensor-parallel rank's share
    assert same(half, {n: t[n] for n in names[::2]})
    two = gst.load_file(idx, tensors=[names[-1], names[0]])
    assert same(two, {n: t[n] for n in (names[-1], names[0])})
    with gst.safe_open(idx, device="cpu") as f:
        assert f.keys() == names and f.metadata() == {"total_size": "123"}
        assert same(f.get_tensors(names[2:5]), {n: t[n] for n in names[2:5]})
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        gst.load_file(idx, tensors=["nope"])
    index["weight_map"]["ghost"] = list(shards)[0]
    idx.write_text(json.dumps(index))
    with pytest.raises(ValueError, match="maps tensor 'ghost' to this file, which lacks it"):
        gst.load_file(idx)
    with pytest.raises(ValueError, match="is in both"):
        gst.load_file([tmp_path / list(shards)[0], tmp_path / list(shards)[0]])


def test_get_slice_reads_rows(tmp_path):
    w = torch.arange(40 * 6, dtype=torch.float32).reshape(40, 6)
    p = tmp_path / "w.safetensors"
    sft.save_file({"w": w, "s": torch.tensor(1.0)}, p)
    with gst.safe_open(p, framework="pt") as f:
        sl = f.get_slice("w")
        assert sl.get_shape() == [40, 6] and sl.get_dtype() == "F32"
        for idx in (slice(10, 20), (slice(3, 9), slice(1, 4)), 5, -1, (slice(None), 2), slice(30, 50, 3),
                    (Ellipsis, 1), slice(7, 7)):
            assert torch.equal(sl[idx], w[idx]), idx
        assert f.stats()["bytes"] in (0, 6 * 4 * 20, 40 * 6 * 4)  # the last read: one of the slices above
        assert torch.equal(f.get_slice("w")[12:14], w[12:14]) and f.stats()["bytes"] == 2 * 6 * 4  # only 2 rows
        assert torch.equal(f.get_slice("s")[...], torch.tensor(1.0))
        with pytest.raises(IndexError, match="index 40 is out of range"):
            sl[40]
        with pytest.raises(ValueError, match="steps must be positive"):
            sl[::-2]
        with pytest.raises(ValueError, match="no tensor named 'q'"):
            f.get_tensor("q")
    with pytest.raises(ValueError, match="framework='tf'"):
        gst.safe_open(p, framework="tf")
    with pytest.raises(ValueError, match="device='tpu'"):
        gst.load_file(p, device="tpu")


def test_page_cache_and_direct_paths_reported(tmp_path):
    """A just-written file comes from the page cache; evicted, by O_DIRECT; half evicted, both at once."""
    g = torch.Generator().manual_seed(1)
    t = {f"w{i}": torch.randn(512, 1031 + i, generator=g) for i in range(24)}  # ~50 MiB, unaligned offsets
    t["tail"] = torch.randn(77, generator=g)
    p = tmp_path / "big.safetensors"
    sft.save_file(t, p)
    size = os.path.getsize(p)
    st: dict = {}
    assert same(gst.load_file(p, stats=st), t)
    if gst.cached_fraction(p) < 1.0:
        pytest.skip("the page cache did not keep a just-written 50 MiB file (memory pressure)")
    assert st["pagecache_bytes"] == st["bytes"] and st["direct_bytes"] == 0
    assert st["data_path"].startswith("pagecache ") and st["data_path"].endswith("-> cpu")
    gst.evict(p)
    assert gst.cached_fraction(p) < 0.1
    st = {}
    assert same(gst.load_file(p, stats=st), t)
    # the header's block is resident again (read to plan the load): tensors in it may be copied from there
    assert st["pagecache_bytes"] < 8192 and st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"] == st["bytes"]
    assert st["buffered_bytes"] < 4096 and st["disk_read_bytes"] >= st["direct_bytes"]  # only the partial last block
    assert "uring+direct" in st["data_path"] or "posix" in st["data_path"], st["data_path"]
    assert gst.cached_fraction(p) < 0.1  # O_DIRECT reads leave nothing in the page cache
    # where the time went: setup, reads, copies after; the three follow one another inside the load's seconds
    assert min(st["setup_s"], st["read_s"], st["tail_s"]) >= 0 and st["read_s"] > 0, st
    assert st["setup_s"] + st["read_s"] + st["tail_s"] <= st["seconds"] + 1e-6, st
    with open(p, "rb") as f:
        f.read(size // 2)  # the first half resident again
    st = {}
    assert same(gst.load_file(p, stats=st), t)
    assert st["pagecache_bytes"] > 0 and st["direct_bytes"] > 0, st["data_path"]
    assert st["data_path"].startswith("pagecache ") and " + " in st["data_path"]
    for threads, chunk in ((1, 4096), (3, 1 << 20)):  # one block per chunk; many chunks per worker
        from gpuio.safetensors._read import read_into_buffers, views
        from gpuio.safetensors._source import Checkpoint

        gst.evict(p)
        with Checkpoint(p) as ck:
            by = ck.by_file(ck.keys())
            bufs, s2 = read_into_buffers(ck, by, torch.device("cpu"), threads=threads, chunk_bytes=chunk)
            assert same(views(bufs, by, torch.device("cpu")), t) and s2["threads"] == threads


SFT_ACCEPTS = {"duplicate"}  # safetensors 0.8 keeps one of the two entries; gpuio refuses the ambiguity


def _write_raw(path, header: dict | bytes, data: bytes = b"", n: int | None = None) -> None:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if n is None else n) + text + data)


@pytest.mark.parametrize("case, message", [
    ("truncated", "truncated: the tensors end at byte"),
    ("short_header", "truncated: the header length"),
    ("header_too_long", "header length 100000001 bytes is too long"),
    ("tiny", "not a safetensors file: 3 bytes"),
    ("overlap", "overlap"),
    ("hole", "a hole of 4 bytes"),
    ("unknown_dtype", "unknown dtype 'F7'"),
    ("shape_mismatch", "is 16 bytes, its data_offsets"),
    ("bad_json", "the header is not valid JSON"),
    ("not_object", "the header is not a JSON object"),
    ("extra_bytes", "bytes past the end of the last tensor"),
    ("bad_metadata", "__metadata__"),
    ("duplicate", "duplicate key 'a'"),
])
def test_bad_files_refused_in_one_line(tmp_path, case, message):
    p = tmp_path / f"{case}.safetensors"
    a = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    b = {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}
    if case == "truncated":
        _write_raw(p, {"a": a, "b": b}, bytes(12))
    elif case == "short_header":
        _write_raw(p, b'{"a":1}', n=500)
    elif case == "header_too_long":
        _write_raw(p, b"{}", n=100_000_001)
    elif case == "tiny":
        p.write_bytes(b"abc")
    elif case == "overlap":
        _write_raw(p, {"a": a, "b": dict(b, data_offsets=[4, 12])}, bytes(12))
    elif case == "hole":
        _write_raw(p, {"a": a, "b": dict(b, data_offsets=[12, 20])}, bytes(20))
    elif case == "unknown_dtype":
        _write_raw(p, {"a": dict(a, dtype="F7")}, bytes(8))
    elif case == "shape_mismatch":
        _write_raw(p, {"a": dict(a, shape=[4])}, bytes(8))
    elif case == "bad_json":
        _write_raw(p, b'{"a": [', bytes(8))
    elif case == "not_object":
        _write_raw(p, b"[1, 2]")
    elif case == "extra_bytes":
        _write_raw(p, {"a": a}, bytes(9))
    elif case == "bad_metadata":
        _write_raw(p, {"__metadata__": {"k": 1}, "a": a}, bytes(8))
    elif case == "duplicate":
        _write_raw(p, b'{"a":' + json.dumps(a).encode() + b',"a":' + json.dumps(a).encode() + b"}", bytes(8))
    with pytest.raises(ValueError) as e:
        gst.load_file(p)
    text = str(e.value)
    assert message in text and str(p) in text and "\n" not in text, text
    assert isinstance(e.value, gst.SafetensorError)
    if case not in SFT_ACCEPTS:  # refused by safetensors too (in its own words)
        with pytest.raises(Exception):
            sft.load_file(p)


def _worker_sum(f, name) -> float:
    gst.evict(f._checkpoint().paths[0])  # the read goes to the disk: through this process's own plan reader
    return float(f.get_tensor(name).double().sum())


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_safe_open_crosses_into_worker_processes(tmp_path, method):
    import concurrent.futures
    import multiprocessing
    import pickle

    t = {"w": torch.arange(300_000, dtype=torch.float32).reshape(300, 1000)}
    p = tmp_path / "w.safetensors"
    sft.save_file(t, p)
    with gst.safe_open(p) as f:
        gst.evict(p)
        assert torch.equal(f.get_tensor("w"), t["w"])  # the parent read it first (its plan reader's pool and ring)
        assert torch.equal(pickle.loads(pickle.dumps(f)).get_tensor("w"), t["w"])
        ctx = multiprocessing.get_context(method)
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            got = pool.submit(_worker_sum, f, "w").result(timeout=120)
        assert got == float(t["w"].double().sum())
        assert torch.equal(f.get_tensor("w"), t["w"])  # the parent still reads after the child did


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_reads_in_flight_are_bounded(tmp_path, threads):
    """safetensors.threads bounds the plan reader calls of a load at once (1 MiB plans of a 12 MiB file, cold: one
    _core.read_plans of 12+ jobs, calls_max of them at once), and each call keeps at most direct_pieces pieces in
    O_DIRECT flight (inflight_max); every byte still arrives."""
    g = torch.Generator().manual_seed(2)
    t = {f"w{i}": torch.randn(1 << 18, generator=g) for i in range(12)}  # 12 MiB: 12+ plans of 1 MiB
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    gst.evict(p)
    st: dict = {}
    with gpuio.defaults.set(**{"safetensors.chunk_mib": 1, "safetensors.threads": threads,
                               "safetensors.ring_kib": 512}):
        assert same(gst.load_file(p, stats=st), t)
    assert st["threads"] == threads and st["chunks"] >= 12, st
    assert 1 <= st["calls_max"] <= threads, st  # how many meet under the bound is the scheduler's: not asserted
    if st["direct_bytes"] == 0:
        pytest.skip("no O_DIRECT on this file system")
    assert 1 <= st["inflight_max"] <= st["direct_pieces"] and st["piece_bytes"] == 256 << 10, st


def test_cold_calls_take_direct_pieces_warm_calls_the_ring(tmp_path):
    """safetensors.direct_kib / direct_pieces shape the calls that read from the disk (pieces of direct_kib, that
    many in flight), and leave the calls that copy resident bytes to ring_kib's two pieces; every byte arrives."""
    g = torch.Generator().manual_seed(3)
    t = {f"w{i}": torch.randn(1 << 18, generator=g) for i in range(8)}  # 8 MiB
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    knobs = {"safetensors.direct_kib": 64, "safetensors.direct_pieces": 6, "safetensors.ring_kib": 1024,
             "safetensors.threads": 1}
    with gpuio.defaults.set(**knobs):
        gst.evict(p)
        cold: dict = {}
        assert same(gst.load_file(p, stats=cold), t)
        p.read_bytes()  # O_DIRECT left the page cache empty: fill it
        warm: dict = {}
        assert same(gst.load_file(p, stats=warm), t)
    assert cold["direct_piece_bytes"] == 64 << 10 and cold["direct_pieces"] == 6 and cold["piece_bytes"] == 512 << 10
    if cold["direct_bytes"] == 0:
        pytest.skip("no O_DIRECT on this file system")
    assert cold["pieces"] >= cold["disk_read_bytes"] // (64 << 10) and 2 < cold["inflight_max"] <= 6, cold
    assert warm["pagecache_bytes"] == warm["bytes"] and warm["inflight_max"] == 0, warm
