"""benchmarks/RESULTS.md, generated from the records in benchmarks/data/results.jsonl: one table per suite, one row
per figure ("gpuio vs X"), each row the newest record of its figure with the device, commit, date and command of
its run and the reference it is a ratio of. A record is one JSON line per figure and run; the file is in the order
the runs were made (dates never go back), so the last record of a figure is its newest.

    python -m benchmarks.results                      # write benchmarks/RESULTS.md from the records
    python -m benchmarks.results --check              # exit 1, saying what differs, when RESULTS.md is stale
    python -m benchmarks.results history SUITE FIGURE # every record of one figure, oldest first
    python -m benchmarks.results add --suite demo --figure epoch-vs-mmap --ratio 5.2 --gpuio "0.674 s/epoch" \\
        --reference "mmap loader 3.514 s/epoch" --device "NVIDIA H100 80GB HBM3" --command "bash scripts/gpu.sh demo"
        # a new run of a figure (its vs, what and ratio_of come from the figure's last record; --commit defaults
        # to git HEAD, --date to today, UTC), validated, appended, and the page rewritten

(`python benchmarks/results.py ...` is the same.) A record's fields: suite, figure (its id in the suite), vs (the X
of "gpuio vs X"), what (the figure in words), ratio (a number), ratio_of (how it is formed, e.g. "mmap s/epoch /
gpuio s/epoch"), gpuio and reference (the two figures of the same run it divides), device, commit, date, command;
optional: target ("OP NUMBER", e.g. ">= 0.9"), note, source (the file holding the run's prose or output).
"""
from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "data" / "results.jsonl"
PAGE = ROOT / "benchmarks" / "RESULTS.md"

# suite id -> (title, what it measures, how to run it now); the page's order
SUITES = {
    "demo": ("`gpuio demo`: GNN training with the features on storage",
             "GraphSAGE with a quarter of the feature table's size in memory, gpuio's feature store against the "
             "np.memmap loader GIDS compares with; the README's main job, from an empty directory",
             "bash scripts/gpu.sh demo"),
    "gpu-path": ("Reads into GPU memory",
                 "4 KiB random and 1 MiB sequential reads from the disk into GPU memory, cold, against the raw "
                 "device (iobench) and the peers users would pick",
                 "bash scripts/gpu.sh check"),
    "host": ("The engine against the raw device, host memory (`gpuio bench`)",
             "uring and posix backends against the best configuration of the in-tree raw reference "
             "(cpp/tools/raw), same file, interleaved rounds, cold",
             "bash scripts/gpu.sh host"),
    "latency": ("One-block latency",
                "p50 of one 4 KiB read against pread O_DIRECT on the same disk in the same run",
                "bash scripts/gpu.sh latency"),
    "ceiling": ("The engine past the disk: emulated devices",
                "N emulated devices (sim backend) where the disk cannot hide the engine: rates against CAM's 5 M "
                "IOPS, scaling against N x one device, the controller against the best hand-picked worker count",
                "bash scripts/gpu.sh ceiling scaling controller"),
    "gnn": ("GNN epoch, memory-constrained",
            "R-MAT graph, 3.81 GiB feature table in a 3 GiB memory cgroup, cold: gpuio's loader against the "
            "np.memmap loader, its own overlap, and the cache-missing gather against the raw device",
            "bash scripts/gpu.sh gnn"),
    "gather": ("Cache-missing gather",
               "TensorFile (tf) and TableCache (fs) gathers of rows one per distinct block, 4 KiB and 512 B rows, "
               "to host memory and to CUDA, against the raw device's 4 KiB random-read rate",
               "bash scripts/gpu.sh gather"),
    "hetero": ("RGAT on IGBH-shaped graphs, one and two GPUs",
               "2 M papers, 108 M edges, 25.7 GB of features in a 12 GiB cgroup (one GPU); data in the caches and "
               "disk-bound runs on two GPUs; bytes read against Belady's MIN (the settings: "
               "docs/archive/results/RESULTS_HETERO.md)",
               "bash scripts/gpu.sh hetero"),
    "apps": ("Applications",
             "the papers' workloads at the judged sizes, cold, each beside its baseline and its ideal",
             "bash scripts/gpu.sh apps"),
    "graph": ("Graph analytics on device arrays",
              "BFS, CC and SSSP on a 2^26-vertex Kronecker graph (15.67 GiB on storage) in a 6 GiB cgroup, cold",
              "bash scripts/gpu.sh graph"),
    "streams": ("Stream store",
                "SSDStreamer streams against the faster of the engine's raw sequential pass and the raw device, "
                "cold; the stream cache example against files, in a 1.5 GiB cgroup",
                "bash scripts/gpu.sh streams"),
    "volumes": ("Volumes on Ceph",
                "gpuio's rbd backend against fio's rbd engine and a synchronous librbd client (Basic), one-node "
                "cluster, replicas 2 (on the GPU machine by the ceph suite; on a CPU box by volumes_bench.py, which "
                "starts its own cluster)",
                "bash scripts/gpu.sh ceph; python benchmarks/volumes_bench.py"),
    "sim": ("Flash simulator",
            "the flash model's speed, and the engine over 8 emulated devices against 8 x one device",
            "bash scripts/gpu.sh sim; python benchmarks/sim_speed.py"),
    "weights": ("Model weights into GPU memory (`gpuio.safetensors`)",
                "an 8.24 GiB GPT-shaped safetensors file written by safetensors (132 tensors, bf16 + fp32) into "
                "cuda:0, each method in its own process, cold (page cache dropped) and warm (file resident), every "
                "tensor checked, rounds rotated; against safetensors, fastsafetensors and Run:ai's streamer and "
                "the raw device on the same file",
                "bash scripts/gpu.sh weights"),
    "workers": ("Data loader workers",
                "rows/s of a torch DataLoader over a table 4 x larger than the memory given, 0/1/2/4 workers per "
                "start method, gpuio TensorFile against np.memmap in the same workers; `gpuio demo` with its "
                "sampling in worker processes (the GPU machine's workers suite; loader_workers.py alone on a CPU box)",
                "bash scripts/gpu.sh workers; python benchmarks/loader_workers.py"),
    "devbox": ("CPU dev box (not the judged machine)",
               "the 2-vCPU shared development box: indicative only, single passes swing by up to 2 x",
               "gpuio bench --size 4G --repeats 3 --seconds 1 --cold"),
}
REQUIRED = ("suite", "figure", "vs", "what", "ratio", "ratio_of", "gpuio", "reference", "device", "commit", "date",
            "command")
# ran_as: the command as it ran, where the scripts it named were replaced since (`command` is today's equivalent,
# naming scripts that exist with options they take: tests/python/benchmarks/test_results_commands.py); run_on: what
# the run needed beside the command (the machine kind, carried files), shown beside it
OPTIONAL = ("target", "note", "source", "ran_as", "run_on")
# fields every record of one figure shares (so a figure means one thing over time)
SAME_PER_FIGURE = ("vs", "ratio_of")
TARGET = re.compile(r"^(>=|<=|>|<) ?(\d+(?:\.\d+)?)$")
FIGURE_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class RecordError(ValueError):
    """A record that cannot be shown: the message names the line, the field and the value."""


def validate(rec: dict, where: str) -> dict:
    """The record, checked: every required field, no unknown one, each of the right form."""
    if not isinstance(rec, dict):
        raise RecordError(f"{where}: not a JSON object")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise RecordError(f"{where}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(rec) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise RecordError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(REQUIRED + OPTIONAL)})")
    for k, v in rec.items():
        if k != "ratio" and not (isinstance(v, str) and v.strip()):
            raise RecordError(f"{where}: {k} {v!r}: not a non-empty string")
    if rec["suite"] not in SUITES:
        raise RecordError(f"{where}: suite {rec['suite']!r}: not one of {', '.join(SUITES)}")
    if not FIGURE_ID.match(rec["figure"]):
        raise RecordError(f"{where}: figure {rec['figure']!r}: lower-case letters, digits, '.' and '-' only")
    r = rec["ratio"]
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0:
        raise RecordError(f"{where}: ratio {r!r}: not a positive finite number")
    try:
        dt.date.fromisoformat(rec["date"])
    except ValueError:
        raise RecordError(f"{where}: date {rec['date']!r}: not YYYY-MM-DD") from None
    if not COMMIT.match(rec["commit"]):
        raise RecordError(f"{where}: commit {rec['commit']!r}: not 7-40 lower-case hex digits")
    if "target" in rec and not TARGET.match(rec["target"]):
        raise RecordError(f"{where}: target {rec['target']!r}: not 'OP NUMBER' with OP one of >=, <=, >, <")
    if "source" in rec and not (ROOT / rec["source"]).exists():
        raise RecordError(f"{where}: source {rec['source']!r}: no such file in the repository")
    return rec


def load(path: Path | None = None) -> list[dict]:
    """Every record of path (default: the repository's), validated, in file order; raises RecordError naming the
    first bad line."""
    path = RECORDS if path is None else path
    records, last_date, figures = [], "", {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise RecordError(f"{where}: not JSON ({e.msg})") from None
        validate(rec, where)
        if rec["date"] < last_date:
            raise RecordError(f"{where}: date {rec['date']} before the line above's {last_date}: records go in the "
                              "order of their runs")
        last_date = rec["date"]
        key = (rec["suite"], rec["figure"])
        first = figures.setdefault(key, rec)
        for k in SAME_PER_FIGURE:
            if rec[k] != first[k]:
                raise RecordError(f"{where}: {k} {rec[k]!r} differs from the first record of {key[0]}/{key[1]} "
                                  f"({first[k]!r}): a figure keeps its meaning; give it another id")
        records.append(rec)
    return records


def met(rec: dict) -> str:
    """'met' / 'not met' against the record's target, '' without one."""
    m = TARGET.match(rec.get("target", ""))
    if not m:
        return ""
    op, bar, r = m.group(1), float(m.group(2)), rec["ratio"]
    ok = {">=": r >= bar, "<=": r <= bar, ">": r > bar, "<": r < bar}[op]
    return "met" if ok else "not met"


def latest(records: list[dict]) -> dict[tuple[str, str], tuple[dict, int]]:
    """(suite, figure) -> (its newest record, how many records it has), in the order figures first appear."""
    out: dict[tuple[str, str], tuple[dict, int]] = {}
    for rec in records:
        key = (rec["suite"], rec["figure"])
        out[key] = (rec, out[key][1] + 1 if key in out else 1)
    return out


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def ratio_text(r: float) -> str:
    """The ratio as measured: at least two decimals under 10 (1.0 -> 1.00, 0.8 -> 0.80), one from 10 on, and the
    recorded digits beyond (1.005 stays 1.005)."""
    text = repr(float(r))
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 0
    return f"{r:.{max(decimals, 2 if r < 10 else 1)}f}"


def _run_key(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(ord("a") + r) + s
    return s


def render(records: list[dict]) -> str:
    """The page's Markdown."""
    rows = latest(records)
    figures = len(rows)
    out = [
        "# gpuio results",
        "",
        "<!-- Generated by `python -m benchmarks.results` from benchmarks/data/results.jsonl: do not edit; add a record "
        "(`python -m benchmarks.results add ...`) and regenerate. CI checks that this page is what the records give. -->",
        "",
        f"{figures} figures from {len(records)} records. Every figure is a ratio of two figures measured side by side in "
        "one run on one machine ([docs/BENCHMARKS.md](../docs/BENCHMARKS.md)): gpuio's and the reference's, both "
        "shown. Each row is the newest record of its figure, with its device, commit, date and command; \"records\" "
        "counts its runs (all of them: `python -m benchmarks.results history SUITE FIGURE`). Absolute figures drift "
        "between machines and runs (the GPU machines' virtio disks differed by up to 3 x): compare ratios. The "
        "sessions' own notes, with the causes, the misses and the raw files: "
        "[docs/archive/results/](../docs/archive/results/README.md).",
    ]
    for suite, (title, blurb, how) in SUITES.items():
        mine = [(k, v) for k, v in rows.items() if k[0] == suite]
        if not mine:
            continue
        out += ["", f"## {title}", "", f"{blurb}. Run: `{how}`.", "",
                "| gpuio vs | figure (ratio of) | ratio | target | gpuio | reference (same run) | device | commit "
                "| date | records | run |",
                "|---|---|---:|---|---|---|---|---|---|---:|---|"]
        runs: dict[tuple[str, str], str] = {}
        notes = []
        for (_, figure), (rec, count) in mine:
            run = (rec["command"], rec.get("source", ""), rec.get("run_on", ""))
            key = runs.setdefault(run, _run_key(len(runs)))
            target = f"{rec['target']}: {met(rec)}" if "target" in rec else ""
            out.append("| " + " | ".join(_cell(c) for c in (
                rec["vs"], f"{rec['what']} ({rec['ratio_of']})", f"**{ratio_text(rec['ratio'])}**", target, rec["gpuio"],
                rec["reference"], rec["device"], rec["commit"], rec["date"], count, key)) + " |")
            if "note" in rec:
                notes.append(f"- {figure}: {rec['note']}")
        out += ["", "Runs:", ""]
        for (command, source, run_on), key in runs.items():
            where = f" ([{Path(source).name}](../{source}))" if source else ""
            on = f" (on: {run_on})" if run_on else ""
            out.append(f"- {key}: `{command}`{on}{where}")
        if notes:
            out += ["", "Notes:", ""] + notes
    return "\n".join(out) + "\n"


def check(records: list[dict], page: Path | None = None) -> str:
    """'' when page (default: the repository's) holds what the records give; else what differs (a unified diff,
    cut)."""
    page = PAGE if page is None else page
    want = render(records)
    have = page.read_text() if page.exists() else ""
    if want == have:
        return ""
    diff = list(difflib.unified_diff(have.splitlines(), want.splitlines(), str(page.name), "from the records",
                                     lineterm="", n=1))
    return "\n".join(diff[:40] + (["..."] if len(diff) > 40 else []))


def history(records: list[dict], suite: str, figure: str) -> str:
    mine = [r for r in records if (r["suite"], r["figure"]) == (suite, figure)]
    if not mine:
        known = sorted({r["figure"] for r in records if r["suite"] == suite})
        raise RecordError(f"no records of {suite}/{figure} (figures of {suite!r}: {', '.join(known) or 'none'})")
    lines = [f"{suite}/{figure}: {mine[0]['what']} ({mine[0]['ratio_of']}), gpuio vs {mine[0]['vs']}", "",
             "| date | commit | device | ratio | gpuio | reference | command |", "|---|---|---|---:|---|---|---|"]
    lines += ["| " + " | ".join(_cell(c) for c in (r["date"], r["commit"], r["device"], ratio_text(r["ratio"]), r["gpuio"],
                                                    r["reference"], r["command"] + (f" (ran as: {r['ran_as']})"
                                                                                   if "ran_as" in r else ""))) + " |"
              for r in mine]
    return "\n".join(lines)


def _git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def add(records: list[dict], fields: dict, path: Path | None = None) -> dict:
    """Append one record: fields given on the command line, the rest of a known figure's shared fields from its last
    record. Validated against the file (dates in order, the figure's meaning kept) before anything is written."""
    path = RECORDS if path is None else path
    rec = {k: v for k, v in fields.items() if v is not None}
    last = [r for r in records if (r["suite"], r["figure"]) == (rec.get("suite"), rec.get("figure"))]
    for k in ("vs", "what", "ratio_of", "target"):
        if k not in rec and last and k in last[-1]:
            rec[k] = last[-1][k]
    rec.setdefault("date", dt.datetime.now(dt.timezone.utc).date().isoformat())
    rec.setdefault("commit", _git_head())
    ordered = {k: rec[k] for k in REQUIRED + OPTIONAL if k in rec}
    ordered.update({k: v for k, v in rec.items() if k not in ordered})
    line = json.dumps(ordered, ensure_ascii=False)
    text = path.read_text() if path.exists() else ""
    trial = path.with_name(path.name + ".new")
    trial.write_text(text + ("" if not text or text.endswith("\n") else "\n") + line + "\n")
    try:
        load(trial)  # the whole file as it would be: one bad field or an older date is refused here
    except RecordError as e:
        trial.unlink()
        raise RecordError(str(e).replace(trial.name, path.name)) from None
    trial.replace(path)
    return ordered


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.results", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when RESULTS.md is not what the records give")
    sub = ap.add_subparsers(dest="cmd")
    h = sub.add_parser("history", help="every record of one figure")
    h.add_argument("suite")
    h.add_argument("figure")
    a = sub.add_parser("add", help="append a record and rewrite the page")
    for f in REQUIRED + OPTIONAL:
        a.add_argument("--" + f.replace("_", "-"), dest=f, type=float if f == "ratio" else str,
                       required=f in ("suite", "figure", "ratio", "gpuio", "reference", "device", "command"))
    args = ap.parse_args(argv)
    try:
        records = load()
        if args.cmd == "history":
            print(history(records, args.suite, args.figure))
            return 0
        if args.cmd == "add":
            rec = add(records, {f: getattr(args, f) for f in REQUIRED + OPTIONAL})
            records = load()
            print(f"added {rec['suite']}/{rec['figure']} {ratio_text(rec['ratio'])} ({rec['date']}, {rec['commit']})")
    except RecordError as e:
        print(f"results: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        diff = check(records)
        if diff:
            print(f"results: {_rel(PAGE)} is not what {_rel(RECORDS)} gives; run "
                  f"`python -m benchmarks.results` and commit it:\n{diff}", file=sys.stderr)
            return 1
        print(f"results: {_rel(PAGE)} matches {len(records)} records")
        return 0
    PAGE.write_text(render(records))
    print(f"results: wrote {_rel(PAGE)} ({len(latest(records))} figures, {len(records)} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
