"""The table and the ratios of benchmarks/model_load.py (its results dict in, lines and ratio records out)."""
from __future__ import annotations

import statistics

GIB = 1 << 30
METHODS = ("gpuio", "safetensors", "fastsafetensors", "runai", "instanttensor")
PEERS = METHODS[1:]


def summary(times: list[float], nbytes: int) -> dict:
    if not times:
        return {}
    return {"best_s": min(times), "median_s": statistics.median(times), "n": len(times),
            "best_GBps": nbytes / min(times) / 1e9}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _fmt(x: float | None, unit: str = "x") -> str:
    return "-" if x is None else f"{x:.2f} {unit}"


def report(res: dict) -> list[str]:
    nbytes, loads = res["bytes"], res["loads"]
    lines = [f"model_load: {nbytes / GIB:.2f} GiB in {res['tensors']} tensors (bf16+fp32), safetensors-written, "
             f"device {res['device']} ({res['device_name']}), {res['rounds_done']} round(s), each pass its own process; "
             f"the file on {res.get('storage', '?')}"]
    lines.append("raw reference grid, same file, O_DIRECT sequential reads, short samples of its first blocks (they "
                 "choose the configurations below): " + ", ".join(
                     f"{k} {v['Bps'] / 1e9:.2f} GB/s" for k, v in res["raw_grid"].items()))
    lines.append("raw device reading the whole file once, cold, in the rotation (the reference): " + ", ".join(
        f"{v['config']} best {v['Bps'] / 1e9:.2f} GB/s (median {v['median_Bps'] / 1e9:.2f}, n={v['n']})"
        for v in res["raw"].values()) + (f" -> best {res['raw_best_Bps'] / 1e9:.2f} GB/s" if res["raw_best_Bps"] else ""))
    if res["h2d_Bps"]:
        lines.append(f"pinned host->device copy: {res['h2d_Bps'] / 1e9:.1f} GB/s")
    if res["device"] == "cpu":
        lines.append("note: on the CPU safetensors (and the other peers) may hand out views of a mapping of the file "
                     "(no read happens in the load): only the GPU figures are comparable")
    raw = res["raw_best_Bps"]
    lines.append(f"{'method':<22} {'cold best':>10} {'median':>8} {'GB/s':>6} {'/raw':>5}   {'warm best':>10} "
                 f"{'median':>8} {'GB/s':>6}   {'misaligned':>10}   check / regime")
    for m, r in loads.items():
        if "skipped" in r:
            lines.append(f"{m:<22} skipped: {r['skipped']}")
            continue
        c, w = r["cold"], r["warm"]
        cell = lambda s: (f"{s['best_s']:>9.3f}s {s['median_s']:>7.3f}s {s['best_GBps']:>6.2f}" if s
                          else f"{'-':>10} {'-':>8} {'-':>6}")
        over_raw = f"{c['best_GBps'] * 1e9 / raw:>5.2f}" if c and raw else f"{'-':>5}"
        mis = f"{r.get('misaligned', 0)}/{res['tensors']}"
        lines.append(f"{m:<22} {cell(c)} {over_raw}   {cell(w)}   {mis:>10}   {r['check']}; {r['regime']}"
                     + (f"; failed: {r['failed']}" if r.get("failed") else ""))
    for k, v in res["ratios"].items():
        lines.append(f"{k:<52} {_fmt(v['best']):>8} (median {_fmt(v['median'])}){'  ' + v['bar'] if v['bar'] else ''}"
                     + (f"  {v['vs']}" if v.get("vs") else ""))
    s = res["saves"]
    if s:
        lines.append("save from the device, fsynced: " + ", ".join(
            f"{m} best {v['best_s']:.3f} s ({v['best_GBps']:.2f} GB/s)" for m, v in s.items() if v)
            + (f"; raw first write of a new file {res['raw_write_Bps'] / 1e9:.2f} GB/s" if res["raw_write_Bps"] else ""))
    if res["verify"]:
        lines.append("gpuio's saved file loads bit-exact in: " + ", ".join(f"{m} {v}" for m, v in res["verify"].items()))
    lines.append(f"misaligned: tensors whose address is not a multiple of {res.get('align', 256)} bytes (most over "
                 f"the passes); /raw: the cold best over the raw device's best whole-file O_DIRECT read "
                 f"({raw / 1e9:.2f} GB/s), same file, same device")
    for regime, dp in res["gpuio_data_path"].items():
        lines.append(f"gpuio data path ({regime}): {dp}")
    return lines


def ratios(res: dict) -> dict:
    loads, nbytes = res["loads"], res["bytes"]
    out = {}
    g = loads.get("gpuio", {})
    for regime, bar in (("cold", ">= 1.0"), ("warm", ">= 1.5")):
        peers = {m: loads[m][regime] for m in PEERS if m in loads and loads[m].get(regime)}
        if g.get(regime) and peers:
            bp = min(peers, key=lambda m: peers[m]["best_s"])
            mp = min(peers, key=lambda m: peers[m]["median_s"])
            out[f"{regime}: gpuio / best peer"] = {
                "best": _ratio(peers[bp]["best_s"], g[regime]["best_s"]),
                "median": _ratio(peers[mp]["median_s"], g[regime]["median_s"]), "bar": bar, "vs": bp}
    if g.get("cold") and res["raw_best_Bps"]:
        out["cold: gpuio / raw disk best sequential read"] = {
            "best": nbytes / g["cold"]["best_s"] / res["raw_best_Bps"],
            "median": nbytes / g["cold"]["median_s"] / res["raw_best_Bps"], "bar": ">= 0.95",
            "vs": f"paired by round {', '.join(f'{x:.2f}' for x in res['paired_cold_raw'])}"}
    for m in PEERS:  # the peers against the same raw read (gpuio's is above)
        c = loads.get(m, {}).get("cold")
        if c and res["raw_best_Bps"]:
            out[f"cold: {m} / raw device best sequential read"] = {
                "best": nbytes / c["best_s"] / res["raw_best_Bps"],
                "median": nbytes / c["median_s"] / res["raw_best_Bps"], "bar": ""}
    if g.get("cold") and res["raw_grid_best_Bps"]:
        out["cold: gpuio / raw grid's best short sample"] = {
            "best": nbytes / g["cold"]["best_s"] / res["raw_grid_best_Bps"],
            "median": nbytes / g["cold"]["median_s"] / res["raw_grid_best_Bps"], "bar": ""}
    if g.get("warm") and res["h2d_Bps"]:
        out["warm: gpuio / pinned host->device rate"] = {
            "best": nbytes / g["warm"]["best_s"] / res["h2d_Bps"],
            "median": nbytes / g["warm"]["median_s"] / res["h2d_Bps"], "bar": "(goal 1.0)"}
    s = res["saves"]
    if s.get("gpuio") and s.get("safetensors"):
        out["save: gpuio / safetensors.save_file + fsync"] = {
            "best": _ratio(s["safetensors"]["best_s"], s["gpuio"]["best_s"]),
            "median": _ratio(s["safetensors"]["median_s"], s["gpuio"]["median_s"]), "bar": ">= 1.2"}
    if s.get("gpuio") and res["raw_write_Bps"]:
        out["save: gpuio / raw first write of a new file"] = {
            "best": res["bytes_saved"] / s["gpuio"]["best_s"] / res["raw_write_Bps"],
            "median": res["bytes_saved"] / s["gpuio"]["median_s"] / res["raw_write_Bps"], "bar": ""}
    return out
