"""The controller section of the ceiling benchmark (docs/decisions/0002): the engine's own worker count (workers=0,
engine/controller.hpp) measured once its controller settled, next to the best hand-picked count for each N.

Judged on re-measurements, not on the grid: two measurements of one configuration 0.3 s each differed by about the
bar on the H100 (672b55b: shm-uring N=1 and N=16 chose the grid's best count yet measured 0.80-0.83 of it). So after
the grid, in the same pass, the controller is measured for judge_s seconds once settled, and the hand-picked engines
at its chosen count and at the grid's two fastest counts for judge_s each: the choice is judged by the hand-picked
rate at the chosen count over the best of those (choice ratio), and the controller's own settled rate is printed
beside it (controller ratio)."""
from __future__ import annotations


SETTLE_FACTOR = 25  # the controller's search may take 25 x seconds (7.5 s at 0.3 s a point): a screen of ~8 windows
                    # and up to 8 rounds of 3 contenders (RateClimb), a window of one stale batch + >= 3 batches of
                    # 16384 blocks (~0.16 s at 0.4 M IOPS, ~30 ms at 3 M)
JUDGE_S = 1.0       # seconds each judged measurement runs (the controller settled; the hand-picked re-measures)
GRID_TOP = 3        # the grid's fastest counts re-measured as the best hand-picked candidates (0.3 s grid points
                    # differed by up to 20 % between two measurements on the H100)


def _search(state: str) -> str:
    """The search number in a controller state ("settled at 6 of 8 (...; search 2)"): a restart changes it."""
    return state.rpartition("search ")[2].rstrip(")")


def judge_counts(hand: list[dict], chosen: int, top: int = GRID_TOP) -> list[int]:
    """The hand-picked counts to re-measure: the chosen one, then the grid's `top` fastest."""
    fast = [r["workers"] for r in sorted(hand, key=lambda r: r["iops"], reverse=True)[:top]]
    return list(dict.fromkeys([chosen, *fast]))


def controller_result(c: dict, hand: list[dict], again: list[dict], kind: str, dest: str, dest_label: str, n: int,
                      log) -> dict:
    """The engine's own worker count (workers=0: the controller's search, engine/controller.hpp) next to the best
    hand-picked count for the same N. c: the engine measured (gpuio_apps.bench.ceiling.measure with settle_s =
    SETTLE_FACTOR x seconds: first run until its controller settled, then measured for judge_s). hand: the grid's
    rows for this N. again: hand-picked engines re-measured right after c for judge_s at judge_counts(hand, chosen).
    choice_ratio: the re-measured rate at the chosen count / the best re-measured rate (the choice judged);
    ratio: the controller's own settled rate / that best; grid_ratio: the grid's rate at the chosen count / the grid's
    best (the short measurements). stable: settled before and after the measured interval, in the same search, with
    no worker-count move inside it (else the ratio measured a search, and the line says so)."""
    chosen = c["workers_active"]
    best = max(again, key=lambda r: r["iops"])
    at = next(r for r in again if r["workers"] == chosen)
    gbest = max(hand, key=lambda r: r["iops"])
    g_at = next((r for r in hand if r["workers"] == chosen), None)
    st = c["settle"]
    x = dict(kind=kind, dest=dest, dest_label=dest_label, devices=n, chosen=chosen, threads=c["worker_threads"],
             iops=c["iops"], chosen_iops=at["iops"], best_workers=best["workers"], best_iops=best["iops"],
             ratio=c["iops"] / best["iops"], choice_ratio=at["iops"] / best["iops"], judge_s=c["seconds"],
             again={r["workers"]: r["iops"] for r in again}, grid_best_workers=gbest["workers"],
             grid_ratio=g_at["iops"] / gbest["iops"] if g_at else None,
             settle_s=st["seconds"], settled=st["settled"], adjustments=st["adjustments"], state=c["controller"],
             state_before=c["controller_before"], moves_measured=c["moves"])
    x["stable"] = (x["settled"] and x["state"].startswith("settled") and x["moves_measured"] == 0
                   and _search(x["state"]) == _search(x["state_before"]))
    gr = f"{x['grid_ratio']:.2f}" if x["grid_ratio"] is not None else "- (count not in the grid)"
    how = ("settled throughout" if x["stable"] else
           f"NOT settled throughout ({x['moves_measured']} moves while measured; before: {x['state_before']}; "
           f"after: {x['state']})")
    ag = " ".join(f"W={w}:{v / 1e6:.3f}" for w, v in x["again"].items())
    log(f"controller {kind:9s} {x['dest_label']:12s} N={n:<2d} chose {chosen} of {x['threads']} threads; "
        f"hand-picked re-measured {x['judge_s']:.2f} s each: {ag} M -> choice ratio {x['choice_ratio']:.2f}; "
        f"controller's own {x['iops'] / 1e6:.3f} M -> ratio {x['ratio']:.2f}; grid (short) best W={gbest['workers']}, "
        f"at W={chosen}: {gr}; search {'settled' if x['settled'] else 'NOT settled'} after {x['settle_s']:.2f} s, "
        f"{x['adjustments']} moves; {how}")
    return x


def controller_table(ctl: list[dict], log) -> None:
    """The controller bar (docs/decisions/0007), per kind/destination/N: the chosen count and the re-measured
    hand-picked rate there next to the best re-measured hand-picked count (judged: choice ratio >= 0.9 for every
    N), and the controller's own settled rate."""
    log("\n| kind | dest | N | chosen W | hand-picked at chosen, M IOPS | best hand-picked W | its M IOPS | "
        "choice ratio | controller's M IOPS | controller ratio | grid (short) at chosen | measured while |")
    log("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in ctl:
        gr = "-" if x["grid_ratio"] is None else f"{x['grid_ratio']:.2f}"
        log(f"| {x['kind']} | {x['dest_label']} | {x['devices']} | {x['chosen']} of {x['threads']} | "
            f"{x['chosen_iops'] / 1e6:.3f} | {x['best_workers']} | {x['best_iops'] / 1e6:.3f} | "
            f"{x['choice_ratio']:.2f} | {x['iops'] / 1e6:.3f} | {x['ratio']:.2f} | {gr} | "
            f"{'settled' if x['stable'] else 'NOT settled throughout: ' + x['state']} |")
    if ctl:
        w = min(ctl, key=lambda x: x["choice_ratio"])
        wc = min(ctl, key=lambda x: x["ratio"])
        log(f"JUDGED controller: worst choice ratio {w['choice_ratio']:.2f} ({w['kind']} {w['dest_label']} "
            f"N={w['devices']} chose {w['chosen']}, best {w['best_workers']}; bar 0.90); within 10 %: "
            f"{sum(x['choice_ratio'] >= 0.9 for x in ctl)} of {len(ctl)}; controller's own rate: worst ratio "
            f"{wc['ratio']:.2f} ({wc['kind']} N={wc['devices']}), within 10 %: {sum(x['ratio'] >= 0.9 for x in ctl)} "
            f"of {len(ctl)}; measured while settled: {sum(x['stable'] for x in ctl)} of {len(ctl)}")
