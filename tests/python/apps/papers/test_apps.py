"""The papers' applications (gpuio_apps.papers) at tiny sizes on the CPU: each run checks its result against an
in-memory reference (a wrong result raises), on one file and on RAID-0 over files; corrupting an output
makes each check fail; the checkpoint layout is read by safetensors itself."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from gpuio_apps.papers import suite, checkpoint, common, gemm, resize, sort, vecadd
from gpuio_apps.papers.pipeline import run_steps
from gpuio_apps.papers.store import PosixStore, Store
from repo_scripts import ROOT

CPU = torch.device("cpu")
REPO = str(ROOT)


def _raid(tmp_path, n=2):
    return [str(tmp_path / f"d{i}.bin") for i in range(n)]


# -- store ------------------------------------------------------------------------------------------------
def test_store_and_pread_baseline_agree_on_raid0_layout(tmp_path):
    paths = _raid(tmp_path, 3)
    data = torch.from_numpy(np.random.default_rng(1).integers(0, 256, 1 << 20, dtype=np.uint8))
    with Store(paths, 2 << 20) as g, PosixStore(paths, 2 << 20) as p:
        e, e2 = common.alloc_both(g, p, "x", 1 << 20), common.alloc_both(g, p, "y", 1 << 20)
        g.write(e, 0, data)                    # engine striping (64 KiB stripes over 3 files) ...
        out = torch.empty_like(data)
        p.read(e, 0, out)                      # ... read back by the baseline's own stripe map
        assert torch.equal(out, data)
        p.write(e2, 8192, data[:65536])
        out2 = torch.empty(65536, dtype=torch.uint8)
        g.read(e2, 8192, out2)
        assert torch.equal(out2, data[:65536])
    assert all(os.path.getsize(x) >= (2 << 20) // 3 for x in paths)


def test_store_on_emulated_devices_creates_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sim = dict(preset="znand", device_bytes=8 << 20, paced=False)
    with Store(["sim0", "sim1"], 4 << 20, backend="sim", sim=sim) as s:
        e = s.alloc("x", 1 << 20)
        d = torch.arange(1 << 18, dtype=torch.int32)
        s.write(e, 0, d)
        out = torch.empty_like(d)
        s.read(e, 0, out)
        assert torch.equal(out, d) and s.capacity_blocks == 1024
    assert not os.listdir(tmp_path)


def test_store_errors_name_the_bad_value(tmp_path):
    with Store(str(tmp_path / "s.bin"), 1 << 20) as g:
        e = g.alloc("a", 64 << 10)
        with pytest.raises(ValueError, match="offset 100"):
            g.read(e, 100, torch.empty(4096, dtype=torch.uint8))
        with pytest.raises(IndexError, match="outside extent 'a'"):
            g.read(e, 64 << 10, torch.empty(4096, dtype=torch.uint8))
        with pytest.raises(ValueError, match="not a whole number of 4096-byte blocks"):
            g.read(e, 0, torch.empty(100, dtype=torch.uint8))
        with pytest.raises(KeyError, match="'a' already exists"):
            g.alloc("a", 4096)
        with pytest.raises(ValueError, match="does not fit"):
            g.alloc("b", 2 << 20)
    with pytest.raises(TypeError, match="store must be a path"):
        Store(3, 4096)
    with pytest.raises(ValueError, match="device='tpu'"):
        gemm.run("tiny", str(tmp_path / "g.bin"), device="tpu")
    with pytest.raises(ValueError, match="size='huge' is not one of tiny, small, medium, large"):
        vecadd.run("huge", str(tmp_path / "v.bin"), "cpu")


# -- applications -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_gemm_tiny_raid0(tmp_path, dtype):
    r = gemm.run("tiny", _raid(tmp_path), "cpu", dtype=dtype)
    assert r["check"].startswith("ok") and r["bytes_written"] == 256 * 256 * (2 if dtype == "bf16" else 4)
    assert r["ideal_s"] == max(r["io_s"], r["compute_s"]) > 0 and r["baseline_s"] > 0
    assert not any(os.path.exists(p) for p in _raid(tmp_path))  # files removed unless keep=True


def test_gemm_check_fails_on_a_wrong_tile(tmp_path):
    app = gemm.Gemm(256, 128, "fp32")
    g, p = common.open_pair(str(tmp_path / "g.bin"), 3 * app.matrix_bytes)
    with g, p:
        app.alloc(g, p)
        app.prepare(g)
        run_steps(g, app.steps(g), CPU, "pipeline")
        assert app.verify(g).startswith("ok")
        g.write(app.ext["C"], app.c_offset(0, 0), torch.zeros(128, 128))
        with pytest.raises(AssertionError, match="differs from the float64 reference"):
            app.verify(g)


def test_sort_tiny_and_its_checks(tmp_path):
    r = sort.run("tiny", str(tmp_path / "s.bin"), "cpu")
    assert r["check"].startswith("ok (sorted") and "equal to in-memory sort" in r["check"]
    assert r["runs"] == 16 and r["threads_s"] > 0
    assert r["merge_io_lines_handwritten_async"] > r["merge_io_lines_gpuio"] > 0
    app = sort.ExternalSort(1 << 16, 256 << 10)
    g, p = common.open_pair(str(tmp_path / "t.bin"), 3 * app.bytes)
    with g, p:
        app.alloc(g, p)
        app.prepare(g)
        run_steps(g, app.run_steps(g), CPU, "pipeline")
        app.merge(g, CPU, "pipeline")
        assert app.verify(g).startswith("ok")
        out = torch.empty(4096, dtype=torch.uint8)
        g.read(app.ext["output"], 0, out)
        k = out.view(torch.int32).clone()
        k[5] = k[4] - 1 if int(k[4]) > -(1 << 31) else k[4]       # break the order in the first block
        g.write(app.ext["output"], 0, k)
        with pytest.raises(AssertionError, match="not sorted|not a permutation"):
            app.verify(g)
        g.write(app.ext["output"], 0, torch.sort(k).values.clamp(max=int(k.max()) - 1))  # sorted, keys changed
        with pytest.raises(AssertionError, match="not a permutation"):
            app.verify(g)


def test_sort_budget_too_small():
    with pytest.raises(ValueError, match="budget=1000 bytes is too small"):
        sort.ExternalSort(1 << 20, 1000)
    with pytest.raises(ValueError, match="too small to merge"):
        sort.ExternalSort(1 << 24, 64 << 10)


def test_sort_merge_pipeline_equals_compute_and_io_replay(tmp_path):
    app = sort.ExternalSort(50_000, 256 << 10)  # 7 runs, the last one short
    g, p = common.open_pair(str(tmp_path / "m.bin"), 3 * app.bytes)
    with g, p:
        app.alloc(g, p)
        app.prepare(p)  # written by the baseline, sorted by the engine
        run_steps(g, app.run_steps(g), CPU, "pipeline")
        order = app.merge(g, CPU, "pipeline")["order"]
        assert sorted(set(order)) == list(range(app.runs)) and app.verify(p).startswith("ok")
        assert app.merge(g, CPU, "compute")["order"] == order  # the same forecast sequence
        assert app.merge(g, CPU, "io", order)["seconds"] > 0


def test_vecadd_tiny_and_a_wrong_element(tmp_path):
    r = vecadd.run("tiny", _raid(tmp_path), "cpu", raw_seconds=0)
    assert r["check"] == f"ok (all {1 << 18} elements exact)"
    app = vecadd.VecAdd(10_000, 1 << 20)  # one short batch: the last block is partly padding
    g, p = common.open_pair(str(tmp_path / "v.bin"), 3 * app.vec_bytes)
    with g, p:
        app.alloc(g, p)
        app.prepare(g)
        run_steps(p, app.steps(p), CPU, "pipeline")
        assert app.verify(g).startswith("ok")
        c = torch.empty(4096, dtype=torch.uint8)
        g.read(app.ext["c"], 0, c)
        c.view(torch.float64)[3] += 1
        g.write(app.ext["c"], 0, c)
        with pytest.raises(AssertionError, match=r"c\[3\]"):
            app.verify(g)


def test_measure_steps_rounds_rotate_take_the_best_and_verify_every_pass(tmp_path, monkeypatch):
    """Round 1 runs pipeline, io-only, baseline; round 2 starts one kind later. Each figure is its kind's best
    pass, and a pipeline pass that writes a wrong result shows in the check even when the first was right."""
    from gpuio_apps.papers import pipeline

    app = vecadd.VecAdd(1 << 16, 1 << 14, depth=4)
    labels, verified = [], []
    real_run, real_verify = pipeline.run_steps, app.verify
    seconds = iter([3.0, 2.0, 5.0, 1.5, 4.0, 2.5])  # the six timed passes, in order

    def fake_run(store, steps, device, mode, depth):
        r = real_run(store, steps, device, mode, depth)
        if len(steps) > 1 and mode != "compute":  # a timed pass (the warm-ups run one step)
            r["seconds"] = next(seconds)
            labels.append((store.kind, mode))
        return r

    def verify(store):
        verified.append(store.kind)
        return "wrong c" if len(verified) == 4 else real_verify(store)

    monkeypatch.setattr(pipeline, "run_steps", fake_run)
    with common.opened_pair(str(tmp_path / "v.bin"), 3 * app.vec_bytes, None, device=CPU) as (g, p):
        app.alloc(g, p)
        app.prepare(g)
        r = pipeline.measure_steps("vecadd", "tiny", g, p, app.steps, verify, CPU, False, "pread", depth=4, rounds=2)
    gk, pk = g.kind, p.kind
    assert labels == [(gk, "pipeline"), (gk, "io"), (pk, "pipeline"), (gk, "io"), (pk, "pipeline"), (gk, "pipeline")]
    assert r["pipeline_runs_s"] == [3.0, 2.5] and r["io_runs_s"] == [2.0, 1.5] and r["baseline_runs_s"] == [5.0, 4.0]
    assert (r["gpuio_s"], r["io_s"], r["baseline_s"], r["rounds"]) == (2.5, 1.5, 4.0, 2)
    assert verified == [gk, pk, pk, gk] and r["check"].endswith("; pipeline pass 2: wrong c")
    assert len(r["io_diag"]) == 6 and all("(host s: read submit " in d for d in r["io_diag"])
    with common.opened_pair(str(tmp_path / "w.bin"), 3 * app.vec_bytes, None, device=CPU) as (g, p):
        app.alloc(g, p)
        app.prepare(g)
        w = real_run(g, app.steps(g), CPU, "pipeline", 4)  # the host's parts lie inside the pass
        assert set(w["host_s"]) == set(pipeline.HOST_PARTS) and min(w["host_s"].values()) > 0
        assert sum(w["host_s"].values()) <= w["seconds"]
    with pytest.raises(ValueError, match="rounds must be an int >= 1, got 0"):
        pipeline.measure_steps("vecadd", "tiny", g, p, app.steps, verify, CPU, False, "pread", rounds=0)


def test_vecadd_output_ring_is_allocated_once(monkeypatch):
    app = vecadd.VecAdd(1 << 16, 1 << 14, depth=4)
    app._ring, app._turn = {}, 0  # as steps() leaves them
    made = []
    real = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, *a, **k: made.append(1) or real(t, *a, **k))
    a, b = torch.ones(2048, dtype=torch.float64), torch.full((2048,), 2.0, dtype=torch.float64)
    outs = [app._add([a.view(torch.uint8), b.view(torch.uint8)])[0] for _ in range(20)]
    assert len(made) == 4 + 2  # depth + 2 buffers, once: not once per step
    assert len({o.data_ptr() for o in outs}) == 6 and all(torch.equal(o, a + b) for o in outs)


def test_resize_tiny_real_photos(tmp_path):
    photos = resize.photo_paths()
    assert photos and all(os.path.exists(p) for p in photos)
    imgs = resize.dataset(4, 64, seed=3)
    assert imgs.shape == (4, 64, 64, 3) and imgs.dtype == np.uint8 and imgs.std() > 10  # real content
    r = resize.run("tiny", str(tmp_path / "r.bin"), "cpu")
    assert r["check"].startswith("ok (48 images")
    with pytest.raises(ValueError, match="not whole 4 KiB blocks"):
        resize.Resize(10, 30, 15, 1)


def test_resize_check_fails_on_a_wrong_pixel(tmp_path):
    app = resize.Resize(16, 64, 32, 16)
    g, p = common.open_pair(str(tmp_path / "r.bin"), 1 << 20)
    with g, p:
        app.alloc(g, p)
        app.prepare(g)
        run_steps(g, app.steps(g), CPU, "pipeline")
        assert app.verify(g).startswith("ok")
        out = torch.empty(16 * app.out_img, dtype=torch.uint8)
        g.read(app.ext["resized"], 0, out)
        out[7] = (int(out[7]) + 128) % 256
        g.write(app.ext["resized"], 0, out)
        with pytest.raises(AssertionError, match="grey levels"):
            app.verify(g)


# -- checkpoints ------------------------------------------------------------------------------------------
def _tensors():
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(300, 77, generator=g), "b": torch.randn(5, generator=g).bfloat16(),
            "i": torch.arange(9, dtype=torch.int64), "step": torch.tensor(3.0), "m": torch.tensor([True, False]),
            "h": torch.randn(33, generator=g).half(), "e": torch.zeros(0, 4)}


def test_checkpoint_is_block_aligned_and_safetensors_loads_it(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    t = _tensors()
    path = str(tmp_path / "c.safetensors")
    info = checkpoint.save_file(t, path, metadata={"note": "x"})
    assert info["data_offset"] % 4096 == 0 and os.path.getsize(path) == info["bytes"]
    theirs = st.load_file(path)
    assert theirs.keys() == t.keys() and all(torch.equal(theirs[k], t[k]) for k in t)
    ours = checkpoint.load_file(path)
    assert all(torch.equal(ours[k], t[k]) and ours[k].dtype == t[k].dtype for k in t)
    plain = str(tmp_path / "plain.safetensors")  # a file safetensors wrote: gpuio reads it too
    st.save_file(t, plain)
    assert all(torch.equal(v, t[k]) for k, v in checkpoint.load_file(plain).items())


def test_checkpoint_resave_over_a_longer_file_and_its_pieces(tmp_path):
    """A save over an existing longer file replaces it (the new file ends where the new checkpoint ends); every
    piece of a many-piece save to a store is written once, in order."""
    st = pytest.importorskip("safetensors.torch")
    path = str(tmp_path / "c.safetensors")
    big = {"x": torch.full((50_000,), 7.0)}
    checkpoint.save_file(big, path)
    t = _tensors()
    info = checkpoint.save_file(t, path)
    assert os.path.getsize(path) == info["bytes"] < 50_000 * 4  # the longer file's end was cut
    theirs = st.load_file(path)
    assert theirs.keys() == t.keys() and all(torch.equal(theirs[k], t[k]) for k in t)
    assert isinstance(info["preallocated"], bool) and info["seconds"] >= info["sync_s"] >= 0
    header, entries, data = checkpoint.layout(t)
    stats: dict = {}
    with Store(str(tmp_path / "p.bin"), 1 << 20) as s:
        e = s.alloc("ck", len(header) + data)
        written = checkpoint.save(s, e, header, entries, CPU, chunk_bytes=8192, slots=3, stats=stats)
        back = checkpoint.load(s, e, len(header) + data, CPU)
    assert written == -(-(len(header) + data) // 4096) * 4096
    assert stats["pieces"] == -(-written // 8192) and 1 <= stats["max_in_flight"] <= 3
    assert all(torch.equal(back[k], t[k]) for k in t)


def test_preallocate_reserves_blocks(tmp_path):
    from gpuio_apps.papers.store import preallocate

    path = str(tmp_path / "r.bin")
    if not preallocate(path, 1 << 20):
        pytest.skip("this file system does not fallocate")
    assert os.path.getsize(path) == 1 << 20 and os.stat(path).st_blocks * 512 >= 1 << 20
    with open(path, "r+b") as f:
        f.write(b"abc")
    assert preallocate(path, 4096) and os.path.getsize(path) == 1 << 20  # kept, never shrunk
    with open(path, "rb") as f:
        assert f.read(3) == b"abc"
    with Store(str(tmp_path / "s.bin"), 1 << 20, preallocate=True) as s:
        assert s.preallocated
    assert os.stat(tmp_path / "s.bin").st_blocks * 512 >= 1 << 20
    with Store(str(tmp_path / "h.bin"), 1 << 20) as s:  # default: sparse
        assert not s.preallocated
    assert os.stat(tmp_path / "h.bin").st_blocks * 512 < 1 << 20


def test_checkpoint_on_raid0_store(tmp_path):
    t = _tensors()
    header, entries, data = checkpoint.layout(t)
    with Store(_raid(tmp_path), 1 << 20) as s:
        e = s.alloc("ck", len(header) + data)
        checkpoint.save(s, e, header, entries, CPU, chunk_bytes=8192)  # many pieces, both slots reused
        back = checkpoint.load(s, e, len(header) + data, CPU)
        # through host pieces (the CUDA default): many pieces, every slot reused, the last piece short
        staged = checkpoint.load(s, e, len(header) + data, CPU, staged=True, stage_bytes=3 * 4096)
    assert back.keys() == t.keys() and all(torch.equal(back[k], t[k]) for k in t)
    assert staged.keys() == t.keys() and all(torch.equal(staged[k], t[k]) for k in t)


def test_checkpoint_staged_load_with_a_partial_last_block(tmp_path):
    t = _tensors()
    path = str(tmp_path / "c.safetensors")
    size = checkpoint.save_file(t, path)["bytes"]
    assert size % 4096  # the file ends inside a block: the tail is read by pread
    with Store(path, size // 4096 * 4096) as s:
        e = s.alloc("checkpoint", size // 4096 * 4096)
        e = checkpoint.Extent(e.name, e.first_block, size, 4096)
        for stage in (4096, 8192, 1 << 20):  # one block per piece, two, all in one piece
            back = checkpoint.load(s, e, size, CPU, tail_path=path, staged=True, stage_bytes=stage)
            assert back.keys() == t.keys() and all(torch.equal(back[k], t[k]) for k in t), stage


def test_checkpoint_rejects_what_safetensors_cannot_store():
    with pytest.raises(ValueError, match="dtype torch.complex128 has no safetensors name"):
        checkpoint.layout({"z": torch.zeros(2, dtype=torch.complex128)})
    with pytest.raises(TypeError, match=r"tensors\['n'\] is a int"):
        checkpoint.layout({"n": 3})


def test_gpt2_tiny_load_train_checkpoint(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    from gpuio_apps.papers import gpt2

    r = gpt2.run("tiny", str(tmp_path / "g.safetensors"), "cpu", raw_seconds=0)
    assert r["check"].startswith("ok (bitwise equal on all 3 paths")
    assert r["checkpoint_bytes"] > 0 and r["compute_s"] > 0 and r["io_s"] == r["save_gpuio_s"] + r["load_gpuio_s"]
    assert not os.path.exists(tmp_path / "g.safetensors")
    assert "resave_gpuio_s" in r and r["save_gpuio_phases"]["pieces"] >= 1


def test_gpt2_raw_references(tmp_path):
    """The raw rewrite and first-write rates beside the checkpoint's (tiny: the figures are not judged)."""
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    from gpuio_apps.papers import gpt2

    r = gpt2.run("tiny", str(tmp_path / "g.safetensors"), "cpu", raw_seconds=0.02)
    assert r["raw_write_Bps"] > 0 and r["raw_first_write_Bps"] > 0
    assert r["resave_of_raw"] > 0 and r["save_of_raw_first_write"] > 0
    assert not os.path.exists(tmp_path / "g.safetensors.raw")
    # the same blocks read raw between two gpuio loads, and torch.save over its own file
    assert r["checkpoint_bytes"] >= 1 << 20 and r["raw_file_read_Bps"] > 0
    assert r["load_of_raw_file"] == pytest.approx(r["checkpoint_bytes"] / r["load_gpuio_s"] / r["raw_file_read_Bps"])
    assert r["load_gpuio_again_s"] > 0 and r["load_again_of_raw_file"] > 0
    assert r["raw_file_write_Bps"] > 0
    assert r["resave_of_raw_file"] == pytest.approx(r["checkpoint_bytes"] / r["resave_gpuio_s"] / r["raw_file_write_Bps"])
    assert r["resave_vs_torch"] == pytest.approx(r["resave_torch_s"] / r["resave_gpuio_s"])


# -- the runner -------------------------------------------------------------------------------------------
def test_bench_runner_table_and_json(tmp_path):
    js = str(tmp_path / "apps.json")
    rc = suite.main(["--size", "tiny", "--device", "cpu", "--apps", "vecadd", "--store", str(tmp_path),
                     "--json", js])
    assert rc == 0
    rows = json.load(open(js))["rows"]
    assert [r["app"] for r in rows] == ["vecadd"] and rows[0]["check"].startswith("ok")
    text = suite.table(rows)
    assert "gpuio/ideal" in text and "vecadd" in text
    assert any("target <= 1.1" in line for line in suite.acceptance(rows))
    with pytest.raises(ValueError, match="matches none"):
        suite.select(["nosuchapp"])


def test_apps_bench_script_and_cli_smoke(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "apps_bench.py"), "--size", "tiny",
                        "--device", "cpu", "--apps", "gemm-fp32", "--json", str(tmp_path / "a.json")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gemm-fp32" in r.stdout and "time / max(I/O, compute)" in r.stdout
    r = subprocess.run([sys.executable, "-m", "gpuio_apps", "bench", "apps", "--size", "tiny",
                        "--workload", "resize"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resize" in r.stdout and "ok (48 images" in r.stdout
