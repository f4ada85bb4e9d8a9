"""Every tensor gpuio.safetensors returns starts on a 256-byte boundary and owns its memory (its storage is its
own bytes, freed when it is deleted), whatever the file's offsets: files written by `safetensors` (no padding:
offsets anywhere) and by transformers' save_pretrained (a tiny GPT-2, sharded), warm (page cache) and cold
(O_DIRECT through the plan reader's ring), every byte compared with safetensors.torch.load_file; zero_copy=True
still gives views of one buffer per file, read by the same plan reader; pages evicted after the residency probe
still arrive, and a file truncated under a load fails naming it. CPU here; test_gpu_safetensors_owned.py checks the
same on CUDA."""
from __future__ import annotations

import gc
import os
import tracemalloc

import pytest
import torch

import gpuio
import gpuio.safetensors as gst
from gpuio.safetensors import _read

sft = pytest.importorskip("safetensors.torch")

ALIGN = 256


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def check_owned(out: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]) -> None:
    """Same names, dtypes, shapes and bytes as ref; each tensor 256-byte aligned, the whole of its own storage,
    and no two tensors' storages share a byte."""
    assert out.keys() == ref.keys()
    ranges = []
    for k, v in out.items():
        r = ref[k]
        assert v.dtype == r.dtype and v.shape == r.shape, k
        assert torch.equal(_bits(v.cpu()), _bits(r)), k
        nbytes = v.numel() * v.element_size()
        if nbytes == 0:
            continue
        s = v.untyped_storage()
        assert v.data_ptr() % ALIGN == 0, (k, v.data_ptr() % ALIGN)
        assert v.is_contiguous() and v.storage_offset() == 0 and s.nbytes() == nbytes, (k, s.nbytes(), nbytes)
        ranges.append((s.data_ptr(), s.data_ptr() + s.nbytes(), k))
    ranges.sort()
    for (_, end, a), (start, _, b) in zip(ranges, ranges[1:]):
        assert end <= start, f"{a} and {b} share storage"


def _odd_model(seed: int = 0) -> dict[str, torch.Tensor]:
    """Offsets off every boundary: odd byte counts, mixed dtypes, small and multi-MiB tensors, 0-d and empty."""
    g = torch.Generator().manual_seed(seed)
    t = {"a_u8": torch.randint(0, 256, (3,), dtype=torch.uint8, generator=g),
         "b_f16": torch.randn(37, generator=g).half(),
         "c_f32": torch.randn(513, 1027, generator=g),            # ~2 MiB, starts off a 4 KiB boundary
         "d_bf16": torch.randn(7, 3, generator=g).bfloat16(),
         "e_i64": torch.arange(-9, 8),
         "f_scalar": torch.tensor(1.5),
         "g_empty": torch.empty(0, 5),
         "h_f64": torch.randn(1 << 18, generator=g).double(),     # 2 MiB
         "i_bool": torch.tensor([True, False, True, True, False])}
    t.update({f"w{i}": torch.randn(255 + i, 129, generator=g) for i in range(6)})
    return t


@pytest.mark.parametrize("regime", ["warm", "cold"])
def test_safetensors_files_load_aligned_and_owned(tmp_path, regime):
    t = _odd_model()
    p = tmp_path / "odd.safetensors"
    sft.save_file(t, p)
    if regime == "cold":
        gst.evict(p)
    st: dict = {}
    out = gst.load_file(p, stats=st)
    check_owned(out, sft.load_file(p))
    assert st["zero_copy"] is False and st["pipeline"] == "cpp", st
    if regime == "cold" and st["direct_bytes"]:
        # the header's block is resident again (the header was read to plan): tensors in it may come from there
        assert st["pagecache_bytes"] < 8192, st
        assert st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"] == st["bytes"], st


def test_the_file_offsets_are_unaligned():
    """The premise of this file: `safetensors` writes offsets that are not 256-byte (nor 4 KiB) aligned."""
    import tempfile

    from gpuio.safetensors._source import Checkpoint

    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "odd.safetensors")
        sft.save_file(_odd_model(), p)
        with Checkpoint(p) as ck:
            offs = [info.begin % ALIGN for _, info in ck.where.values() if info.nbytes]
    assert sum(1 for o in offs if o) >= len(offs) - 1, offs


@pytest.mark.parametrize("threads, chunk", [(1, 4096), (3, 1 << 20), (8, 16 << 20)])
def test_chunks_split_across_tensors_cold_and_half_warm(tmp_path, threads, chunk):
    """Chunks of one block (a tensor over many chunks, a chunk over many tensors) and of many; cold, then half
    the file resident (both paths in one load, the resident bytes preadv'd straight into the destinations)."""
    t = _odd_model(1)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    ref = sft.load_file(p)
    with gpuio.defaults.set(**{"safetensors.threads": threads, "safetensors.chunk_mib": 1}):
        for half in (False, True):
            gst.evict(p)
            if half:
                with open(p, "rb") as f:
                    f.read(os.path.getsize(p) // 2)
            from gpuio.safetensors._source import Checkpoint

            with Checkpoint(p) as ck:
                by = ck.by_file(ck.keys())
                out, st = _read.read_tensors(ck, by, torch.device("cpu"), threads=threads, chunk_bytes=chunk)
            check_owned(out, ref)
            assert st["threads"] <= threads and st["bytes"] == sum(v.nbytes for v in ref.values()), st


def test_selected_tensors_with_gaps_between_them(tmp_path):
    """A selection leaves holes inside runs (merged through a block): only the chosen tensors are written, each
    whole and owned."""
    t = _odd_model(2)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    ref = sft.load_file(p)
    pick = ["a_u8", "d_bf16", "f_scalar", "w1", "w4"]
    for regime in ("warm", "cold"):
        if regime == "cold":
            gst.evict(p)
        out = gst.load_file(p, tensors=pick)
        check_owned(out, {k: ref[k] for k in pick})


def test_deleting_a_tensor_frees_its_bytes(tmp_path):
    """Ownership, measured: dropping one loaded tensor gives back its bytes (tracemalloc sees NumPy's
    allocations), where a zero-copy view gives back nothing while its file's buffer has other views."""
    g = torch.Generator().manual_seed(3)
    t = {"big": torch.randn(1 << 20, generator=g), "small": torch.randn(33, generator=g)}  # 4 MiB
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    for zero_copy, frees in ((False, True), (True, False)):
        gc.collect()
        tracemalloc.start()
        try:
            out = gst.load_file(p, zero_copy=zero_copy)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            del out["big"]
            gc.collect()
            freed = before - tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert (freed >= 4 << 20) is frees, (zero_copy, freed)
        assert torch.equal(out["small"], t["small"])


@pytest.mark.parametrize("regime", ["warm", "cold", "half"])
def test_zero_copy_gives_views_of_one_buffer(tmp_path, regime):
    """zero_copy=True through the plan reader: the file's runs are its destinations, every byte arrives warm, cold
    and half resident, and each tensor's address is congruent to its file offset modulo 4 KiB (in the buffer)."""
    t = _odd_model(4)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    ref = sft.load_file(p)
    if regime != "warm":
        gst.evict(p)
    if regime == "half":
        with open(p, "rb") as f:
            f.read(os.path.getsize(p) // 2)
    st: dict = {}
    out = gst.load_file(p, zero_copy=True, stats=st)
    assert st["zero_copy"] is True and st["pipeline"] == "cpp", st
    assert st["bytes"] >= sum(v.nbytes for v in ref.values()), st  # the runs: gaps within a block read through
    assert all(torch.equal(_bits(out[k]), _bits(ref[k])) for k in ref)
    storages = {out[k].untyped_storage().data_ptr() for k in ref if out[k].numel()}
    assert len(storages) == 1  # one buffer per file
    from gpuio.safetensors._source import Checkpoint

    with Checkpoint(p) as ck:
        offsets = {n: info.begin for n, (_, info) in ck.where.items()}
    assert all(out[k].data_ptr() % 4096 == offsets[k] % 4096 for k in ref if out[k].numel()), offsets
    with pytest.raises(AssertionError):
        check_owned(out, ref)


@pytest.mark.parametrize("zero_copy", [False, True])
def test_pages_evicted_after_the_probe_still_arrive(tmp_path, monkeypatch, zero_copy):
    """The residency probe says every byte is resident, but the file was evicted: the RWF_NOWAIT copies stop at the
    first missing page and the plan reader reads the rest by O_DIRECT (never a short or stale destination)."""
    from gpuio import _core

    t = _odd_model(6)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    ref = sft.load_file(p)
    gst.evict(p)
    monkeypatch.setattr(_core, "page_cache_residency", lambda fd, ranges: ([n for _, n in ranges], "claimed"))
    st: dict = {}
    out = gst.load_file(p, stats=st, zero_copy=zero_copy)
    assert st["residency"] == "claimed", st
    if zero_copy:
        assert all(torch.equal(_bits(out[k]), _bits(ref[k])) for k in ref)
    else:
        check_owned(out, ref)
    assert st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"] == st["bytes"], st
    if gst.cached_fraction(p) < 0.5:  # O_DIRECT here (not tmpfs): the bytes came from the disk, not the probe's word
        assert st["direct_bytes"] > st["bytes"] // 2, st


@pytest.mark.parametrize("zero_copy", [False, True])
def test_a_file_truncated_under_a_load_fails_naming_it(tmp_path, zero_copy):
    """The header was read (the plan made for the whole file), then the file lost its second half: the load raises
    OSError naming the file and the offset, in one line; a load of the file as it is now is refused as truncated."""
    from gpuio.safetensors._source import Checkpoint

    p = tmp_path / "m.safetensors"
    sft.save_file(_odd_model(7), p)
    with Checkpoint(p) as ck:
        os.truncate(p, os.path.getsize(p) // 2)
        fd = os.open(p, os.O_RDONLY)  # gst.evict would open the file, and refuse it as truncated
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        with pytest.raises(OSError) as e:
            _read.read_tensors(ck, ck.by_file(ck.keys()), torch.device("cpu"), zero_copy=zero_copy)
    text = str(e.value)
    assert str(p) in text and "at byte" in text and "\n" not in text, text
    with pytest.raises(gst.SafetensorError, match="truncated"):
        gst.load_file(p)


def test_slices_are_owned_and_aligned(tmp_path):
    t = _odd_model(5)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    with gst.safe_open(p, framework="pt") as f:
        got = {"rows": f.get_slice("c_f32")[3:9], "cols": f.get_slice("c_f32")[3:9, 5:77],
               "one": f.get_slice("w2")[7], "all": f.get_tensor("d_bf16")}
    check_owned(got, {"rows": t["c_f32"][3:9], "cols": t["c_f32"][3:9, 5:77], "one": t["w2"][7],
                      "all": t["d_bf16"]})


def test_transformers_gpt2_sharded_checkpoint(tmp_path):
    """A tiny GPT-2 saved by transformers' save_pretrained in several shards (its index): every tensor aligned,
    owned and equal to what safetensors reads; the model loads the state dict and gives the same logits."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=503, n_positions=40)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.save_pretrained(tmp_path, max_shard_size="60KB", safe_serialization=True)
    shards = sorted(n for n in os.listdir(tmp_path) if n.endswith(".safetensors"))
    assert len(shards) > 1 and any(n.endswith(".index.json") for n in os.listdir(tmp_path)), shards
    ref = {}
    for n in shards:
        ref.update(sft.load_file(tmp_path / n))
    for regime in ("warm", "cold"):
        if regime == "cold":
            gst.evict(tmp_path)
        out = gst.load_file(tmp_path)
        check_owned(out, ref)
    other = transformers.GPT2LMHeadModel(cfg).eval()
    other.load_state_dict(out, strict=False)
    ids = torch.arange(17).reshape(1, 17) % cfg.vocab_size
    with torch.no_grad():
        assert torch.equal(model(ids).logits, other(ids).logits)
