"""What `gpuio demo` prints: the per-source table, the correctness checks and the one-line headline."""
from __future__ import annotations


def _by(results: list[dict], name: str) -> dict | None:
    return next((r for r in results if r["backend"] == name), None)


def print_table(results: list[dict], console) -> None:
    from rich.table import Table
    table = Table(title="per epoch (mean of timed epochs, warm-up excluded); features from:")
    table.add_column("")
    for r in results:
        table.add_column(r["backend"] + (" (capped)" if r.get("capped") else ""), justify="right")
    pct = (lambda r, k: f"{100 * r[k]:.1f}%" if k in r else "-")
    rows = [("epoch s", lambda r: f"{r['epoch_s']:.3f}"),
            ("feature loading s", lambda r: f"{r['feature_s']:.3f}"),
            ("trainer waiting s", lambda r: f"{r['stall_s']:.3f}"),
            ("compute s", lambda r: f"{r['compute_s']:.3f}"),
            ("batches run", lambda r: f"{r['batches_run']}"),
            ("host buffer hits", lambda r: pct(r, "host_hit_rate")),
            ("device cache hits", lambda r: pct(r, "gpu_hit_rate")),
            ("rows from storage", lambda r: pct(r, "device_rate")),
            ("test accuracy", lambda r: "-" if r["test_acc"] != r["test_acc"] else f"{r['test_acc']:.3f}"),
            ("last loss", lambda r: f"{r['losses'][-1]:.4f}" if r["losses"] else "-")]
    for name, fmt in rows:
        table.add_row(name, *(fmt(r) for r in results))
    console.print(table)
    for r in results:
        if r.get("data_path"):
            console.print(f"{r['backend']} data path: {r['data_path']}")
        if r.get("cgroup_peak") is not None:
            console.print(f"{r['backend']}: memory cgroup peak {r['cgroup_peak'] / 2**20:.0f} MiB, page cache at the "
                          f"end {r['cgroup_cache'] / 2**20:.0f} MiB ({r.get('cache_note', '')} before it)")
        if r.get("capped"):
            console.print(f"{r['backend']}: stopped at its time cap after {r['batches_run']} batches; its epoch "
                          f"time is extrapolated from them ({r['batches_per_epoch']} batches an epoch)")


def check(results: list[dict], device: str, exact_losses: bool | None = None, rounding: str = "GPU atomics",
          kernels: str = "") -> tuple[bool, list[str]]:
    """Features byte-identical across sources on every batch both ran; losses identical where the kernels are
    deterministic (exact_losses; default: on the CPU). Elsewhere (a GPU's atomic scatter-add) losses may
    differ by rounding: the largest difference is reported with `rounding` (why), mmap-vs-memory beside.
    kernels: named after identical losses (e.g. "deterministic CUDA kernels")."""
    if exact_losses is None:
        exact_losses = not device.startswith("cuda")
    ref = _by(results, "memory") or (results[0] if results else None)
    ok, lines = True, []
    for r in results:
        if ref is None or r is ref:
            continue
        n = min(len(r["sums"]), len(ref["sums"]))
        same_x = r["sums"][:n] == ref["sums"][:n] and n > 0
        m = min(len(r["losses"]), len(ref["losses"]))
        diffs = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(r["losses"][:m], ref["losses"][:m])]
        exact = all(d == 0 for d in diffs)
        ok &= same_x and (exact or not exact_losses)
        loss_text = (f"losses identical{f' ({kernels})' if kernels else ''}" if exact else
                     f"losses within {max(diffs):.1e} relative ({rounding})" if not exact_losses else
                     f"losses DIFFER (max {max(diffs):.1e} relative)")
        lines.append(f"{r['backend']} vs {ref['backend']}: features "
                     f"{'byte-identical' if same_x else 'DIFFER'} over {n} batches; {loss_text}")
    return ok, lines


def print_checks(results: list[dict], cfg, console, **how) -> None:
    """The check lines (`check`; how: its exact_losses, rounding, kernels), and FAILED when one failed."""
    ok, lines = check(results, cfg.device, **how)
    for line in lines:
        console.print(line)
    if not ok:
        console.print("[bold red]check FAILED: the sources did not deliver the same features or losses[/]")


def headline(results: list[dict], cfg, larger: float | None = None) -> str:
    """The one line: gpuio's and mmap's s/epoch and their ratio. larger: how many times the features exceed the
    memory given (default 1 / cfg.memory_fraction; 0: there was no memory limit)."""
    g, m = _by(results, "gpuio"), _by(results, "mmap")
    if g is None or m is None:
        return ""
    larger = 1 / cfg.memory_fraction if larger is None else larger
    where = (f"with features {larger:.0f}x larger than the memory given" if larger >= 1 else
             f"with features that fit in the memory given ({larger:.2f}x its size)" if larger else
             "with no memory limit (the page cache may hold the features)")
    return (f"gpuio {g['epoch_s']:.2f} s/epoch vs mmap {m['epoch_s']:.2f} s/epoch {where}: "
            f"{m['epoch_s'] / g['epoch_s']:.1f}x")


def print_headline(results: list[dict], cfg, console, larger: float | None = None) -> None:
    text = headline(results, cfg, larger)
    if text:
        console.print(f"[bold]{text}[/]")


def plot(results: list[dict], path: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["backend"] for r in results]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(names, [r["compute_s"] for r in results], label="compute")
    ax.bar(names, [max(r["epoch_s"] - r["compute_s"], 0) for r in results],
           bottom=[r["compute_s"] for r in results], label="waiting for features/sampling")
    ax.set_ylabel("seconds per epoch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
