"""benchmarks/apps_summary.py (the judged-points table of `scripts/gpu.sh apps|graph`) on the rows that the tiny CPU
runs write: every judged point appears, a missing run reads "not measured", runs below the judged size are
labelled, a bar is called met only when the value passes it."""
import json

from gpuio_apps.papers import suite
from repo_scripts import load_script

summ = load_script("benchmarks/apps_summary.py")


def _cells(text: str, point: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(point))
    return [c.strip() for c in line.split("|")]


def test_summary_of_tiny_runs_and_missing_ones(tmp_path):
    rows = suite.run_all("tiny", "cpu", store=str(tmp_path), apps=["sort", "vecadd"])
    with open(tmp_path / "apps-tiny.json", "w") as f:
        json.dump({"rows": rows}, f, default=str)
    graph = load_script("benchmarks/graph_bench.py").main(
        ["--tiny", "--device", "cpu", "--algos", "bfs", "--data-dir", str(tmp_path / "g"), "--json",
         str(tmp_path / "graph-bfs.json")])
    (tmp_path / "steps.tsv").write_text("sort\t0\t3\t400\ngpt2\t124\t200\t200\n")
    text = summ.summary(str(tmp_path))
    sort_row = next(r for r in rows if r["app"] == "sort")
    c = _cells(text, "sort: pread/pwrite / gpuio")
    assert c[1] == f"{sort_row['speedup']:.2f}" and c[2] == ">= 1.5" and "small" in c[3] and "BELOW" in c[4]
    assert _cells(text, "vecadd: rate / raw read+write")[3].endswith("small)")
    c = _cells(text, "bfs: pread+copy / gpuio-array")
    ratio = next(r["seconds"] for r in graph["rows"] if r["source"] == "pread+copy") / \
        next(r["seconds"] for r in graph["rows"] if r["source"] == "gpuio-array")
    assert c[1] == f"{ratio:.2f}" and "graph500 ok" in c[4]
    assert _cells(text, "checkpoints (GPT-2)")[1] == "not measured"
    assert _cells(text, "cc")[1] == "not measured"
    assert "gpt2 200 s (rc 124)" in text


def test_met_only_when_the_value_passes_the_bar():
    row = dict(app="vecadd", n=10 ** 9, gpuio_s=10.0, baseline_s=11.0, of_ideal=1.12, of_raw=0.9, check="ok",
               raw_read_Bps=3e9, raw_write_Bps=2e9)
    lines = {x[0]: x for x in summ.judged({"vecadd": row}, [])}
    assert lines["vecadd: time / max(I/O, compute)"][3] == "not met"
    assert lines["vecadd: rate / raw read+write"][3] == "MET"
    g = dict(app="gpt2-medium", gpuio_s=5.0, checkpoint_bytes=4e9, save_of_raw=0.95, load_of_raw=0.5,
             save_vs_torch=3.2, load_vs_torch=1.0, save_gpuio_s=1.0, load_gpuio_s=2.0, save_torch_s=3.2,
             load_torch_s=2.0, check="ok (safetensors reads gpuio's file)", regime="cold")
    lines = {x[0]: x for x in summ.judged({"gpt2-medium": g}, [])}
    assert lines["checkpoint save / raw device write"][3] == "MET"
    assert lines["checkpoint load / raw device read"][3] == "not met"
    assert lines["checkpoint save: torch / gpuio"][3] == "MET"
    assert lines["safetensors loads gpuio's checkpoint"][3] == "MET"
    # with the same-bytes references measured, they are judged; the grid's 1 s samples go to the note
    g.update(raw_read_Bps=1.6e9, raw_write_Bps=3.6e9, raw_file_read_Bps=2.1e9, load_of_raw_file=0.96,
             load_again_of_raw_file=0.94, raw_first_write_Bps=1.6e9, save_of_raw_first_write=0.85,
             raw_file_write_Bps=2.5e9, resave_of_raw_file=0.93, resave_vs_torch=3.4)
    lines = {x[0]: x for x in summ.judged({"gpt2-medium": g}, [])}
    load, save = lines["checkpoint load / raw device read"], lines["checkpoint save / raw device write"]
    assert (load[1], load[3], save[1], save[3]) == ("0.96", "MET", "0.85", "not met")
    assert "same blocks read raw (2.10 GB/s); grid 0.50 x 1.60 GB/s (1 s samples); load again 0.94" in load[4]
    assert "re-save 0.93 x the same blocks rewritten raw (2.50 GB/s)" in save[4]
    assert "both over their own files 3.40x" in lines["checkpoint save: torch / gpuio"][4]


def test_gemm_line_shows_both_baselines_or_why_kvikio_is_missing():
    base = dict(gpuio_s=1.5, baseline="pread+copy", baseline_s=1.9, speedup=1.9 / 1.5, of_ideal=1.05, check="ok")
    kv = dict(base, app="gemm-bf16", kvikio_s=2.4, speedup_kvikio=2.4 / 1.5)
    skipped = dict(base, app="gemm-fp32", kvikio_skipped="kvikio not importable: no module")
    lines = {x[0]: x for x in summ.judged({"gemm-bf16": kv, "gemm-fp32": skipped}, [])}
    note = lines["gemm-bf16: time / max(I/O, compute)"][4]
    assert "gpuio 1.50 s, pread+copy 1.90 s (1.27x), kvikio 2.40 s (1.60x)" in note
    assert "kvikio skipped" in lines["gemm-fp32: time / max(I/O, compute)"][4]
    assert lines["gemm-bf16: time / max(I/O, compute)"][3] == "MET"
