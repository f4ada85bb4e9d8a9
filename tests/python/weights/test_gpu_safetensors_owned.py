"""On CUDA, every tensor gpuio.safetensors returns starts on a 256-byte boundary and owns its memory (deleting it
gives its bytes back to the caching allocator), whatever the file's offsets: files written by `safetensors` and a
sharded GPT-2 of transformers' save_pretrained, warm and cold, through the plan reader's ring, every byte equal to
safetensors.torch.load_file's; the GPT-2's logits equal those of the state dict `safetensors` loads onto the
device (the misaligned views of before gave other cuBLAS kernels). A load in a background thread runs while the
main thread launches CUDA work of its own (the watchdog fails a hang). GPU machine; skipped without CUDA."""
from __future__ import annotations

import os
import threading

import pytest

torch = pytest.importorskip("torch")
sft = pytest.importorskip("safetensors.torch")

import gpuio.safetensors as gst  # noqa: E402

from gpu_util import watchdog_fixture  # noqa: E402
from test_safetensors_owned import _odd_model, check_owned  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")]
_watchdog = watchdog_fixture("test_gpu_safetensors_owned")


@pytest.mark.parametrize("ring_kib", [8, 64, 2048])  # 8: one block a piece
@pytest.mark.parametrize("regime", ["warm", "cold"])
def test_cuda_tensors_aligned_and_owned(tmp_path, monkeypatch, ring_kib, regime):
    """Through the plan reader (its ring from the one pinned pool, registered with CUDA: _core.pinned_pool_stats)."""
    monkeypatch.setenv("GPUIO_SAFETENSORS_RING_KIB", str(ring_kib))
    p = tmp_path / "odd.safetensors"
    sft.save_file(_odd_model(), p)
    ref = sft.load_file(p)
    if regime == "cold":
        gst.evict(p)
    st: dict = {}
    out = gst.load_file(p, device="cuda", stats=st)
    assert all(v.is_cuda for v in out.values())
    check_owned(out, ref)
    assert st["zero_copy"] is False and st["data_path"].endswith("-> pinned -> cuda:0"), st
    assert st["pipeline"] == "cpp", st
    from gpuio import _core

    pool = _core.pinned_pool_stats()
    assert pool["registered_bytes"] > 0 and pool["free_bytes"] == pool["made_bytes"], pool
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    nbytes = out["c_f32"].numel() * 4
    del out["c_f32"]
    assert before - torch.cuda.memory_allocated() >= nbytes  # its own block, back to the allocator


@pytest.mark.parametrize("regime", ["warm", "cold"])
def test_cuda_zero_copy_views(tmp_path, regime):
    """zero_copy=True onto CUDA through the plan reader: one buffer per file, every byte, warm and cold."""
    p = tmp_path / "odd.safetensors"
    sft.save_file(_odd_model(1), p)
    ref = sft.load_file(p)
    if regime == "cold":
        gst.evict(p)
    st: dict = {}
    out = gst.load_file(p, device="cuda", zero_copy=True, stats=st)
    assert st["zero_copy"] is True and st["pipeline"] == "cpp" and st["data_path"].endswith("-> cuda:0"), st
    assert all(out[k].is_cuda and torch.equal(out[k].cpu(), ref[k]) for k in ref)
    assert len({out[k].untyped_storage().data_ptr() for k in ref if out[k].numel()}) == 1


@pytest.mark.parametrize("zero_copy", [False, True])
def test_cuda_load_of_pages_evicted_after_the_probe(tmp_path, monkeypatch, zero_copy):
    """The probe claims every byte resident but the file was evicted: the plan reader's RWF_NOWAIT copies stop at
    the first missing page and the rest comes by O_DIRECT, onto the device bit for bit."""
    from gpuio import _core

    p = tmp_path / "odd.safetensors"
    sft.save_file(_odd_model(3), p)
    ref = sft.load_file(p)
    gst.evict(p)
    monkeypatch.setattr(_core, "page_cache_residency", lambda fd, ranges: ([n for _, n in ranges], "claimed"))
    st: dict = {}
    out = gst.load_file(p, device="cuda", stats=st, zero_copy=zero_copy)
    assert st["residency"] == "claimed" and all(v.is_cuda for v in out.values()), st
    if zero_copy:
        assert all(torch.equal(out[k].cpu(), ref[k]) for k in ref)
    else:
        check_owned(out, ref)
    assert st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"] == st["bytes"], st


def test_cuda_load_of_a_file_truncated_under_it_fails_naming_it(tmp_path):
    """The plan made for the whole file, the file then cut in half: OSError naming the file and the offset, after
    every copy to the device has ended (the next load onto the device works)."""
    from gpuio.safetensors import _read
    from gpuio.safetensors._source import Checkpoint

    p = tmp_path / "odd.safetensors"
    sft.save_file(_odd_model(4), p)
    ref = sft.load_file(p)
    q = tmp_path / "copy.safetensors"
    q.write_bytes(p.read_bytes())
    with Checkpoint(q) as ck:
        os.truncate(q, os.path.getsize(q) // 2)
        fd = os.open(q, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        with pytest.raises(OSError) as e:
            _read.read_tensors(ck, ck.by_file(ck.keys()), torch.device("cuda", 0))
    assert str(q) in str(e.value) and "at byte" in str(e.value), e.value
    torch.cuda.synchronize()
    check_owned(gst.load_file(p, device="cuda"), ref)


def test_gpt2_logits_equal_safetensors_on_cuda(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1003, n_positions=64)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path, max_shard_size="300KB", safe_serialization=True)
    ref = {}
    for n in sorted(os.listdir(tmp_path)):
        if n.endswith(".safetensors"):
            ref.update(sft.load_file(tmp_path / n, device="cuda"))
    ids = (torch.arange(40, device="cuda").reshape(2, 20) * 7) % cfg.vocab_size
    logits = []
    for sd in (ref, gst.load_file(tmp_path, device="cuda")):
        if sd is not ref:
            check_owned(sd, {k: v.cpu() for k, v in ref.items()})
        m = transformers.GPT2LMHeadModel(cfg).to("cuda").eval()
        m.load_state_dict(sd, strict=False)
        with torch.no_grad():
            logits.append(m(ids).logits)
    assert torch.equal(logits[0], logits[1])


def test_owned_load_in_a_thread_beside_cuda_work(tmp_path):
    p = tmp_path / "odd.safetensors"
    sft.save_file(_odd_model(2), p)
    ref = sft.load_file(p)
    done, errors = threading.Event(), []

    def loader():
        try:
            for i in range(6):
                if i % 2:
                    gst.evict(p)
                check_owned(gst.load_file(p, device="cuda"), ref)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        finally:
            done.set()

    th = threading.Thread(target=loader, daemon=True)
    th.start()
    it = 0
    while not done.is_set():  # launches, cudaFree and device syncs while the loader copies
        a = torch.randn(256 + it, 256, device="cuda")
        (a @ a.T).sum().item()
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        it += 1
    th.join(timeout=60)
    assert not errors, errors
