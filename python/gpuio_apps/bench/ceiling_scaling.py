"""Scaling over N devices with a rate of their own (the efficiency bar, docs/decisions/0007): the devices' rated
figures, the
bounds that only such devices have (their own rate; depth by Little's law) and the judged scaling line.

The paced null device (ceiling kind `paced-null`: sim backend with null_paced=1, io/link_clock.hpp) has a latency
and a link rate of its own but costs the host only bookkeeping, like a real drive that does its flash work and DMA
in hardware; no data is produced (read buffers keep what they held). Its figures in effect are the ones its backend
reports (describe(): "null=on(paced: latency_ns=... link_mb_s=...)"), read here, never restated.
"""
from __future__ import annotations

import re
import time

BS = 4096
EFFICIENCY_BAR = 0.9   # IOPS(N) >= 0.9 x N x one device (docs/decisions/0007)
DEVICE_SATURATED = 0.97  # a run at >= this fraction of N x the rated rate is bounded by the devices themselves;
DEVICE_NEAR = 0.9        # at >= this one too, unless a host resource is named first (workers, caller, copies)
DEPTH_MARGIN = 2.0     # outstanding reads below this many times Little's law's need: named as the depth bound
PCIE_SATURATED = 0.85  # GPU destination: GB/s at >= this fraction of the measured pinned host->GPU copy rate

_RATED = re.compile(r"null=on\(paced: latency_ns=(\d+) link_mb_s=(\d+)")


def rated(backend: str) -> dict | None:
    """A paced null device's rated figures from its backend description, or None for other devices:
    latency_us (idle read), iops (4 KiB reads/s its link allows)."""
    m = _RATED.search(backend or "")
    if not m:
        return None
    lat_ns, mb_s = int(m.group(1)), int(m.group(2))
    return dict(latency_us=lat_ns / 1e3, link_mb_s=mb_s, iops=mb_s * 1e6 / BS)


def outstanding_max(r: dict) -> int:
    """Reads that can be outstanding at the devices: the batches in flight, capped by the workers' rings."""
    return min(r["inflight"] * r["batch"], max(1, r["workers_active"]) * r["queue_depth"])


def depth_needed(r: dict) -> float:
    """Little's law: reads outstanding to keep N rated devices busy = N x rate x idle latency."""
    d = r["rated"]
    return r["devices"] * d["iops"] * d["latency_us"] * 1e-6


def device_rate_bound(r: dict, at: float = DEVICE_SATURATED) -> str | None:
    """The devices' own rate when the run reached `at` of it (the bound every rated device count should name)."""
    d = r.get("rated")
    if not d:
        return None
    cap = r["devices"] * d["iops"]
    if r["iops"] < at * cap:
        return None
    return (f"the devices' own rate: {r['iops'] / cap:.0%} of N x {d['iops'] / 1e6:.3f} M IOPS "
            f"({d['link_mb_s']} MB/s link, {d['latency_us']:.1f} us latency each)")


def pcie_h2d_gbps(nbytes: int = 256 << 20, reps: int = 5) -> float:
    """Pinned host -> GPU copy rate by copy engine (GB/s, best of reps one-shot copies of nbytes): the PCIe rate the
    GPU destination's staging->GPU copies can approach. Needs CUDA (torch)."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        best = max(best, nbytes / (time.perf_counter() - t0) / 1e9)
    return best


def pcie_bound(r: dict) -> str | None:
    """The PCIe copy rate, when a GPU-destination run moved >= PCIE_SATURATED of the measured host->GPU rate."""
    p = r.get("pcie_gbps")
    if r["dest"] != "gpu" or not p or r["gbps"] < PCIE_SATURATED * p:
        return None
    return f"PCIe host->GPU copies: {r['gbps']:.1f} GB/s = {r['gbps'] / p:.0%} of the {p:.1f} GB/s measured pinned copy"


def depth_bound(r: dict) -> str | None:
    """Too few reads outstanding for N devices' latency x rate (Little's law), when that is the case."""
    if not r.get("rated"):
        return None
    have, need = outstanding_max(r), depth_needed(r)
    if have >= DEPTH_MARGIN * need:
        return None
    return (f"depth: at most {have} reads outstanding (inflight {r['inflight']} x batch {r['batch']}, "
            f"{r['workers_active']} rings x {r['queue_depth']}); N devices need {need:.0f} (N x rate x latency)")


def judged_scaling(rows: list[dict], log, w_max: int = 6, dest_of=lambda r: r["dest"]) -> list[dict]:
    """Per rated kind and destination: efficiency at each N (best row with <= w_max workers) against the bar, the
    first N below it and the bound named there; beside it the null devices' best at that N (the engine without device
    latency) where the grid has them."""
    out = []
    for kind, dest in dict.fromkeys((r["kind"], dest_of(r)) for r in rows if r.get("rated")):
        best = {}
        for r in rows:
            if (r["kind"], dest_of(r)) == (kind, dest) and r["workers"] <= w_max:
                if r["devices"] not in best or r["iops"] > best[r["devices"]]["iops"]:
                    best[r["devices"]] = r
        ns = sorted(best)
        below = next((n for n in ns if best[n]["efficiency"] < EFFICIENCY_BAR), None)
        at = best[below if below is not None else ns[-1]]
        null = [r for r in rows if (r["kind"], dest_of(r), r["devices"]) == ("null", dest, at["devices"])
                and r["workers"] <= w_max]
        null_best = max((r["iops"] for r in null), default=None)
        x = dict(kind=kind, dest=dest, w_max=w_max, efficiency={n: best[n]["efficiency"] for n in ns},
                 workers={n: best[n]["workers"] for n in ns}, iops={n: best[n]["iops"] for n in ns},
                 met_up_to=ns[-1] if below is None else max((n for n in ns if n < below), default=None),
                 first_below=below, bound=at["bound"], null_iops=null_best)
        out.append(x)
        effs = " ".join(f"{best[n]['efficiency']:.2f} (N={n} W={best[n]['workers']} {best[n]['iops'] / 1e6:.2f} M)"
                        for n in ns)
        where = (f">= {EFFICIENCY_BAR} at every N up to {ns[-1]}: met; bound at N={ns[-1]}" if below is None else
                 f"below {EFFICIENCY_BAR} from N={below}; bound named there")
        eng = "" if null_best is None else (f"; null devices at N={at['devices']}: {null_best / 1e6:.2f} M "
                                            f"(the engine without device latency)")
        log(f"JUDGED scaling {kind} -> {dest}, <= {w_max} workers: efficiency {effs}; {where}: {at['bound']}{eng}")
    return out
