"""The controller section of the ceiling benchmark (issue 14, point 4): the engine's own worker count (workers=0,
engine/controller.hpp) measured once its controller settled, next to the best hand-picked count for each N."""
from __future__ import annotations


SETTLE_FACTOR = 10  # the controller's search may take 10 x seconds (3 s at 0.3 s a point): ~12 probes (ladder,
                    # bisection, the best and the choice confirmed) of one stale batch + a window of >= 3 batches of
                    # 16384 blocks: 0.16 s a probe at 0.4 M IOPS (41 ms a batch)


def _search(state: str) -> str:
    """The search number in a controller state ("settled at 6 of 8 (...; search 2)"): a restart changes it."""
    return state.rpartition("search ")[2].rstrip(")")


def controller_result(c: dict, hand: list[dict], kind: str, dest: str, dest_label: str, n: int, log) -> dict:
    """The engine's own worker count (workers=0: the controller hill-climbs on measured rates, engine/controller.hpp)
    next to the best hand-picked count for the same N. c: the engine measured (gpuio.bench.ceiling.measure with
    settle_s = SETTLE_FACTOR x seconds: first run until its controller settled, then measured for `seconds` like the
    hand-picked counts). ratio: its IOPS / the best hand-picked IOPS; grid_ratio: the grid's IOPS at the chosen
    count / the best (the choice judged on the same measurements, free of this run's noise). stable: settled
    before and after the measured interval, in the same search, with no worker-count move inside it (else the
    ratio measured a search, and the line says so)."""
    best = max(hand, key=lambda r: r["iops"])
    at_chosen = next((r for r in hand if r["workers"] == c["workers_active"]), None)
    st = c["settle"]
    x = dict(kind=kind, dest=dest, dest_label=dest_label, devices=n, chosen=c["workers_active"],
             threads=c["worker_threads"], iops=c["iops"], best_workers=best["workers"], best_iops=best["iops"],
             ratio=c["iops"] / best["iops"], grid_ratio=at_chosen["iops"] / best["iops"] if at_chosen else None,
             settle_s=st["seconds"], settled=st["settled"], adjustments=st["adjustments"], state=c["controller"],
             state_before=c["controller_before"], moves_measured=c["moves"])
    x["stable"] = (x["settled"] and x["state"].startswith("settled") and x["moves_measured"] == 0
                   and _search(x["state"]) == _search(x["state_before"]))
    gr = f"{x['grid_ratio']:.2f}" if x["grid_ratio"] is not None else "- (count not in the grid)"
    how = ("settled throughout" if x["stable"] else
           f"NOT settled throughout ({x['moves_measured']} moves while measured; before: {x['state_before']}; "
           f"after: {x['state']})")
    log(f"controller {kind:9s} {x['dest_label']:12s} N={n:<2d} chose {x['chosen']} of {x['threads']} threads "
        f"{x['iops'] / 1e6:.3f} M IOPS; best hand-picked W={x['best_workers']} {x['best_iops'] / 1e6:.3f} M; "
        f"ratio {x['ratio']:.2f} (grid at W={x['chosen']}: {gr}); search {'settled' if x['settled'] else 'NOT settled'} "
        f"after {x['settle_s']:.2f} s, {x['adjustments']} moves; measured {c['seconds']:.2f} s {how}")
    return x


def controller_table(ctl: list[dict], log) -> None:
    """Issue 14's controller bar, per kind/destination/N: the chosen count and its rate next to the best
    hand-picked count and its rate (judged: ratio >= 0.9 for every N, measured while settled)."""
    log("\n| kind | dest | N | chosen W | its M IOPS | best hand-picked W | its M IOPS | ratio | grid at chosen | "
        "measured while |")
    log("|---|---|---|---|---|---|---|---|---|---|")
    for x in ctl:
        gr = "-" if x["grid_ratio"] is None else f"{x['grid_ratio']:.2f}"
        log(f"| {x['kind']} | {x['dest_label']} | {x['devices']} | {x['chosen']} of {x['threads']} | "
            f"{x['iops'] / 1e6:.3f} | {x['best_workers']} | {x['best_iops'] / 1e6:.3f} | {x['ratio']:.2f} | {gr} | "
            f"{'settled' if x['stable'] else 'NOT settled throughout: ' + x['state']} |")
    if ctl:
        worst = min(ctl, key=lambda x: x["ratio"])
        log(f"JUDGED controller: worst ratio {worst['ratio']:.2f} ({worst['kind']} {worst['dest_label']} "
            f"N={worst['devices']}; bar 0.90); measured while settled: {sum(x['stable'] for x in ctl)} of {len(ctl)}")
