"""benchmarks/hetero_scaling.py: the N-GPU / 1-GPU line from several runs' JSON reports (medians, spread)."""
import json

from repo_scripts import load_script

hs = load_script("benchmarks/hetero_scaling.py")


def _report(path, ranks, run_s, steps=100, batch=1024, stall=0.5):
    per = [dict(rank=i, run_s=run_s + 0.01 * i, steps=steps, stall_s=stall, feature_bytes=0, structure_bytes=0,
                sample_s=0.4, feature_s=0.3) for i in range(ranks)]
    r = dict(backend="gpuio", batch_size=batch, ranks=per, step_end_s=[0.5 + i * (run_s - 0.5) / (steps - 1)
                                                                        for i in range(steps)])
    path.write_text(json.dumps(dict(config={}, results=[dict(backend="memory"), r])))
    return str(path)


def test_medians_of_alternating_runs_and_the_bar(tmp_path, capsys):
    files = [_report(tmp_path / f"{i}-{n}.json", n, t) for i, (n, t) in
             enumerate([(1, 5.0), (2, 5.4), (1, 5.5), (2, 6.2), (1, 5.2), (2, 5.6)])]
    assert hs.main(files) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 7 and out[0].endswith("compute-bound: loading keeps up")
    assert "1 rank(s) 20,480 seeds/s, first step 0.50 s, then 45.5 ms/step" in out[0]
    # medians: 2 ranks 204800 / 5.61 s (the slowest rank), 1 rank 102400 / 5.2 s
    want = (204800 / 5.61) / (102400 / 5.2)
    assert out[-1].startswith(f"judged: 2 GPUs / 1 GPU seeds/s = {want:.2f} (goal >= 1.8: MET)")
    assert "medians of 3 and 3 runs" in out[-1] and f"runs span {(204800 / 6.21) / (102400 / 5.0):.2f}-" in out[-1]
    slow = [_report(tmp_path / "slow.json", 2, 6.0), files[0]]
    assert hs.main(slow) == 0 and "NOT MET" in capsys.readouterr().out


def test_no_one_gpu_run_and_no_arguments(tmp_path, capsys):
    assert hs.main([_report(tmp_path / "a.json", 2, 5.0)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "judged: 2 GPUs / 1 GPU: no one-GPU run to compare with"
    assert hs.main([]) == 2
