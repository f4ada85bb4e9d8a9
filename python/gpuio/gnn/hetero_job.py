"""GIDS's experiment on gpuio: RGAT on an IGBH-shaped graph, features (and optionally the structure) on
storage, N steps timed end to end, accuracy reported; one process or data-parallel under torchrun.

Per backend (same sampler seed, same model initialisation, same mini-batches):
- gpuio:  per node type a `gpuio.FeatureStore` (device page cache + constant host buffer of the most
          sampled rows + window + accumulator) over the type's TensorFile;
- mmap:   `np.load(mmap_mode="r")` + fancy indexing (the mmap loader GIDS compares against), with
          MADV_RANDOM as `gpuio demo` runs it: without it each 4 KB row fault reads ahead pages that are
          evicted unused out of core, so this is the kinder baseline and gpuio's ratio the conservative one;
- memory: every table in memory (the reference: its losses are what the others must reproduce).
Structure: `structure="file"` samples every relation's CSC through the engine (gpuio.graph.CSCFile), with
one page-cache budget (`struct_cache_mb`) shared over the relations' files (gpuio.graph.split_struct_cache),
`"memory"` holds it in tensors; both give the same samples. `"file,memory"` runs every backend with each
(same batches) and prints the throughput of structure-on-storage as a share of structure-in-memory.
Each run starts cold: the dataset's files are dropped from the page cache first (`cold`).

Data parallel (torchrun sets RANK/WORLD_SIZE/LOCAL_RANK): NCCL on GPUs, gloo on the CPU; every rank
opens the same files with its own stores and takes every world_size-th global batch; DDP averages the
gradients, so all ranks hold the same parameters after every step. Cache design: per-GPU caches (each
rank caches what its own batches read). The alternative — one cache partitioned by row owner, rows
exchanged over NVLink each batch (WholeGraph / cuGraph) — has world_size x the capacity but adds an
all-to-all per batch and per type; see docs/archive/results/RESULTS_HETERO.md for the choice and how to measure it.
"""
from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from gpuio.gnn.config import apply_machine_defaults
from gpuio.graph.csc_file import STRUCT_CACHE_BYTES_DEFAULT, relation_file_bytes
from gpuio.gnn.hetero_report import BACKENDS, CAP_LOAD, STRUCTURES, at, cap_for, parse_caps, plan_caps, print_report
CPU_DEFAULTS = dict(papers=4000, features=128, batch_size=256, eval_nodes=1000)
GPU_DEFAULTS = dict(papers=200_000, features=1024, batch_size=1024, eval_nodes=20_000)
T_START = time.perf_counter()  # the job's clock for --budget (reset by run)
COMPUTE_ONLY_BATCHES = 10  # batches held on the device to time compute alone (~1 GB each at 1024 columns)


@dataclass
class HeteroConfig:
    root: str = "gpuio-igbh"  # dataset directory (generated here when it holds no matching dataset)
    igbh: str = ""  # import a real IGBH `processed` directory into root first
    papers: int = 0  # 0: the CPU or GPU default
    features: int = 0
    dtype: str = "float32"
    edge_scale: float = 1.0
    gen_device: str = "cpu"  # where the generator draws feature noise (cuda: faster, other bytes)
    backends: tuple = ("gpuio", "memory")
    structure: str = "file"  # file (read through the engine), memory, or "file,memory" (both, side by side)
    steps: int = 100
    batch_size: int = 0
    fanouts: tuple = (10, 5)
    hidden: int = 128
    heads: int = 4
    lr: float = 0.005
    gpu_cache_fraction: float = 0.1  # device cache per type, as a share of the type's table
    host_fraction: float = 0.2  # constant host buffer, share of each type's rows (GIDS: 20 % of the data)
    # window buffer and look-ahead: bytes read vs Belady's MIN (same trace, same tiers), gpuio's MIN admission,
    # 100 steps: IGBH-shaped 2 M papers, 1024 float32 columns (a row per page), batches of 1024 (the judged geometry,
    # a trace study on the CPU): 8/4 1.25, 16/13 1.04, 32/29 1.02 (device tier); 40 k papers, batches of 64: 1.068,
    # 1.028, 1.000. The old all-or-nothing protection read 1.265 at 8/4 and more with larger windows.
    window: int = 32
    depth: int = 2  # submitted batches queued before the oldest is handed out
    lookahead: int = 29  # batches announced to the window before their rows are submitted (< window - depth)
    # structure="file": page cache in all, MiB, shared over the relation files (gpuio.graph.split_struct_cache)
    struct_cache_mb: int = STRUCT_CACHE_BYTES_DEFAULT >> 20
    sample_threads: int = 0  # threads sampling ahead per rank (0: gpuio.pyg.hetero_loader's default)
    eval_nodes: int = 0
    seed: int = 0
    device: str = ""
    background: bool = True  # loader thread (False: inline on the training thread)
    belady: bool = False  # record the row trace of the gpuio run, compare its bytes with MIN
    timing: bool = False  # gpuio: also time loading alone and compute alone
    time_cap: str = ""  # seconds a run's timed steps may run: "" / 0 no cap, "S" every run, or per label
    #                     "gpuio=120,mmap=50,gpuio/memory=40,load=90" (hetero_report.parse_caps); a capped run
    #                     stops early, is compared over the common steps, is not evaluated, and says so
    runs: str = ""  # "backend/structure,..." in order (e.g. "gpuio/file,gpuio/memory,mmap/file"); "" = every
    #                 backend under every structure. timing and belady apply to the first gpuio run
    warmup_steps: int = -1  # steps left out of per-step comparisons of capped runs (-1: a quarter of them)
    budget: float = 0.0  # seconds the whole job may take (0: none): the caps shrink to fit (plan_caps)
    save_params: str = ""  # write the final parameters here (rank r: <path>.rank<r>)
    json_out: str = ""
    generate_only: bool = False  # write (or import) the dataset, then stop
    disk_mbs: float = 0.0  # the raw device's 4 KiB random-read rate (MB/s, e.g. iobench): judges the disk-bound runs
    cold: bool = True  # drop the dataset's files from the page cache before every run
    deterministic: bool = False  # torch's deterministic kernels (no atomics in scatter/index_add on CUDA): two
    #                              runs on the same batches then give bit-equal losses; slower on CUDA

    @property
    def loader_lookahead(self) -> int:
        """The look-ahead the loaders run with: `lookahead`, bounded by what the window holds beside the
        `depth` submitted batches and the one being served."""
        return min(self.lookahead, max(self.window - self.depth - 1, 0))

    @property
    def structures(self) -> tuple:
        return tuple(dict.fromkeys(s for _, s in self.run_list)) if self.runs else tuple(self.structure.split(","))

    @property
    def run_list(self) -> list:
        """[(backend, structure), ...] in the order they run."""
        if self.runs:
            return [tuple(x.strip().split("/", 1)) if "/" in x else (x.strip(), self.structure.split(",")[0])
                    for x in self.runs.split(",")]
        return [(b, s) for s in self.structure.split(",") for b in self.backends]

    def resolve(self) -> "HeteroConfig":
        if self.runs:
            pairs = self.run_list
            bad = [f"{b}/{s}" for b, s in pairs if b not in BACKENDS or s not in STRUCTURES]
            if bad or len(set(pairs)) != len(pairs):
                raise ValueError(f"runs must be distinct backend/structure pairs of {BACKENDS} x {STRUCTURES}, "
                                 f"got {self.runs!r}")
            self.backends = tuple(dict.fromkeys(b for b, _ in pairs))
        apply_machine_defaults(self, CPU_DEFAULTS, GPU_DEFAULTS, BACKENDS)
        if not self.structures or any(s not in STRUCTURES for s in self.structures) or \
                len(set(self.structures)) != len(self.structures):
            raise ValueError(f"structure must be 'file', 'memory' or 'file,memory', got {self.structure!r}")
        if self.sample_threads < 0:
            raise ValueError(f"sample_threads must be >= 0 (0: the loader's default), got {self.sample_threads}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        parse_caps(self.time_cap)  # ValueError on a bad spec
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0 seconds, got {self.budget}")
        for name in ("gpu_cache_fraction", "host_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        return self


def prepare_dataset(cfg: HeteroConfig, log=print):
    """The dataset in cfg.root: imported from cfg.igbh, reused when its generator parameters match, else
    generated (out of core, chunked)."""
    from gpuio.data.igbh import IGBHConfig, generate_igbh, import_igbh, open_igbh
    meta_path = os.path.join(cfg.root, "meta.json")
    if cfg.igbh:
        if not os.path.exists(meta_path):
            log(f"importing IGBH from {cfg.igbh} into {cfg.root}")
            import_igbh(cfg.igbh, cfg.root)
        return open_igbh(cfg.root, seed=cfg.seed), True
    gen = IGBHConfig(papers=cfg.papers, features=cfg.features, dtype=cfg.dtype, edge_scale=cfg.edge_scale,
                     seed=cfg.seed, gen_device=cfg.gen_device)
    try:
        with open(meta_path) as f:
            if json.load(f).get("generator") == asdict(gen):
                return open_igbh(cfg.root, seed=cfg.seed), True
    except (OSError, ValueError):
        pass
    t0 = time.perf_counter()
    ds = generate_igbh(cfg.root, gen)
    log(f"generated {cfg.root}: {ds.num_edges:,} edges, {ds.feature_bytes() / 2**30:.2f} GiB of features "
        f"in {time.perf_counter() - t0:.1f} s")
    return ds, False


def sample_scores(ds) -> dict:
    """Per node type, how often a node can be drawn as a sampled neighbour: its out-degree summed over
    the relations it is a source of (streamed from the CSC row files; 8 bytes per node in memory)."""
    from gpuio.graph.csc_file import csc_chunks
    scores = {nt: np.zeros(n, dtype=np.int64) for nt, n in ds.num_nodes.items()}
    for et in ds.edge_types:
        for _, src in csc_chunks(ds.relation_path(et))():
            scores[et[0]] += np.bincount(src, minlength=scores[et[0]].size)
    return {nt: torch.from_numpy(s) for nt, s in scores.items()}


def make_sources(backend: str, ds, cfg: HeteroConfig, scores: dict | None, hosts: dict | None = None) -> dict:
    """Per node type the backend's row source. gpuio: a FeatureStore per type; `hosts` (type -> HostBuffer),
    when given, is shared: a type found there reuses its buffer (the constant tier, read once per job), a
    type not there gets one filled and added."""
    from gpuio.cache import FeatureStore, InMemoryRows, MemmapRows
    from gpuio.tensor import TensorFile
    out = {}
    for nt in ds.node_types:
        path = ds.feature_path(nt)
        if backend == "memory":
            out[nt] = InMemoryRows(torch.from_numpy(np.load(path)))
        elif backend == "mmap":
            out[nt] = MemmapRows(path, random_access=True)
        else:
            tf = TensorFile.open(path)
            host_rows = int(tf.num_rows * cfg.host_fraction)
            shared = (hosts or {}).get(nt)
            out[nt] = FeatureStore(tf, gpu_cache_bytes=int(tf.nbytes * cfg.gpu_cache_fraction),
                                   host_cache_rows=host_rows, hot_scores=scores[nt] if host_rows else None,
                                   window=cfg.window, accumulate=True, device=cfg.device, host_buffer=shared)
            if hosts is not None and shared is None and out[nt].host is not None:
                hosts[nt] = out[nt].host
    return out


def make_loader(cfg: HeteroConfig, ds, graph, sources: dict, seed_nodes, sampler_seed: int, rank: int = 0,
                world: int = 1, shuffle: bool = True, steps: int | None = None):
    """The job's HeteroBatchLoader of papers `seed_nodes` over `graph` and `sources` (make_sources): cfg's
    fan-outs, batch size, depth, window look-ahead and sampling threads; rank of world when shuffled (training),
    else one loader over all of them (evaluation); `steps` batches (default cfg.steps)."""
    from gpuio.pyg.hetero import HeteroNeighborSampler
    from gpuio.pyg.hetero_loader import HeteroBatchLoader
    threads = dict(sample_threads=cfg.sample_threads) if cfg.sample_threads else {}
    return HeteroBatchLoader(HeteroNeighborSampler(graph, list(cfg.fanouts), seed=sampler_seed), sources,
                             seed_nodes, "paper", cfg.batch_size, labels=ds.y, shuffle=shuffle, seed=cfg.seed,
                             depth=cfg.depth, device=torch.device(cfg.device), rank=rank if shuffle else 0,
                             world_size=world if shuffle else 1, max_batches=cfg.steps if steps is None else steps,
                             background=cfg.background, lookahead=cfg.loader_lookahead, **threads)


DIST_TIMEOUT_S = 3 * 3600  # collectives wait this long: rank 0 may generate a large dataset behind a barrier


def _dist(device: str):
    """(rank, world_size, local_rank) from torchrun's environment; initialises the process group (NCCL when
    the job runs on CUDA devices, else gloo). Any number of ranks; rank r uses cuda:<LOCAL_RANK>."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, 0
    import datetime

    import torch.distributed as dist
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(local)
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=DIST_TIMEOUT_S))
    return dist.get_rank(), dist.get_world_size(), local


def cgroup_memory() -> dict | None:
    """This process's memory cgroup (v2) as the run sees it: limit (None: unlimited), peak so far, anonymous
    memory and page cache now, in bytes; None where the process is in no v2 group with a memory controller."""
    from gpuio.bench.memlimit import V2_ROOT, MemoryLimit
    try:
        path = MemoryLimit._v2_home()
        if not os.path.exists(os.path.join(path, "memory.stat")):
            return None
        g = MemoryLimit(2, path, path)
        return dict(limit=g.limit_bytes(), peak=g.peak_bytes(), anon=g.anon_bytes(), file=g.cache_bytes(),
                    group=os.path.relpath(path, V2_ROOT))
    except (OSError, ValueError, KeyError):
        return None


def storage_bytes(sources: dict) -> int:
    """Bytes the gpuio tables have read from storage so far (blocks actually read; 0 for other sources)."""
    return sum(s.tf.stats()["bytes_read"] for s in sources.values() if hasattr(getattr(s, "tf", None), "stats"))


def evict_page_cache(root: str) -> int:
    """Drop every file under `root` from the page cache (fdatasync, then posix_fadvise DONTNEED: no root
    needed), so a run does not read what the generator or the previous run left cached. Returns the files."""
    n = 0
    for folder, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
            finally:
                os.close(fd)
    return n


def run_backend(backend: str, ds, cfg: HeteroConfig, scores, rank=0, world=1, structure: str | None = None,
                cap: float = 0.0, load_cap: float = 0.0, timing: bool = False, belady: bool = False,
                hosts: dict | None = None, replan=None) -> dict:
    """One run: `cfg.steps` training steps (at most `cap` seconds of them) of `backend` with the structure
    in `structure`, evaluated unless capped. timing: first loading alone (at most `load_cap` seconds, stores
    and structure of its own), then compute alone on held batches. belady: bytes read vs MIN on the trace.
    hosts: shared host buffers (make_sources). replan: () -> the run's cap, asked again after the loading-alone
    pass (the budget left then)."""
    from gpuio.cache.belady import record_served, store_vs_min
    from gpuio.gnn.rgat import accuracy, compute_only, load_only, make_rgat, train_steps
    from gpuio.pyg.hetero import HeteroGraphStore
    dev = torch.device(cfg.device)
    structure = structure or cfg.structures[0]

    def new_graph():  # cold structure caches for each timed pass
        return HeteroGraphStore.from_dataset(ds, in_memory=structure == "memory",
                                             cache_bytes=cfg.struct_cache_mb << 20, device=dev)

    def loader(graph, sources, seed_nodes, sampler_seed, shuffle=True, steps=cfg.steps):
        return make_loader(cfg, ds, graph, sources, seed_nodes, sampler_seed, rank, world, shuffle, steps)

    def deadline(seconds):
        return time.perf_counter() + seconds if seconds else None
    in_dims = {nt: ds.feature_shape(nt)[1] for nt in ds.node_types}
    if timing:  # loading alone first, on stores and structure of its own (dropped before the run's are built)
        r_load = load_only(loader(new_graph(), make_sources(backend, ds, cfg, scores, hosts), ds.train_idx,
                                  cfg.seed + rank), deadline(load_cap))
        r_load["capped"] = r_load["steps"] < cfg.steps
        _end_at_last_step(r_load)
        if replan is not None:
            cap = replan()
        gc.collect()  # its stores are gone before the run's are made
    graph = new_graph()
    sources = make_sources(backend, ds, cfg, scores, hosts)
    trace = {nt: record_served(s) for nt, s in sources.items()} if belady else None
    if rank == 0:  # at once: a run cut by an outer timeout still shows how long its set-up took
        print(f"{backend}/{structure}: stores ready (host buffers filled) at job time "
              f"{time.perf_counter() - T_START:.0f} s; steps start", flush=True)
    model = make_rgat(ds.edge_types, in_dims, ds.num_classes, cfg.hidden, cfg.heads, cfg.seed, dev)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel
        # find_unused_parameters=False: every parameter gets a gradient on every batch (the model computes only
        # what the target's logits use, gpuio.gnn.rgat.needed_types, and the sampler passes every relation, empty
        # or not; tests/python/test_hetero.py checks it), so DDP skips its search of the autograd graph each
        # step. gradient_as_bucket_view: gradients live in DDP's all-reduce buckets instead of being copied
        # there each step; 2 x H200, same data and call: 35 025 -> 36 844 seeds/s (1 GPU 18 594),
        # docs/archive/results/RESULTS_2026-11-25-night.md
        model = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None,
                                        find_unused_parameters=False, gradient_as_bucket_view=True)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sync = torch.cuda.synchronize if dev.type == "cuda" else None
    struct_before, feat_before = sum(s["bytes_from_device"] for s in graph.stats().values()), storage_bytes(sources)
    r = train_steps(model, loader(graph, sources, ds.train_idx, cfg.seed + rank), opt, sync=sync,
                    deadline=deadline(cap))
    r["capped"], r["cfg_steps"], r["time_cap_s"] = r["steps"] < cfg.steps, cfg.steps, float(cap)
    _end_at_last_step(r)
    r["structure_bytes"] = sum(s["bytes_from_device"] for s in graph.stats().values()) - struct_before
    r["structure_bytes_open"] = struct_before  # files their cache share covers, read whole when the graph opened
    r["feature_bytes"] = storage_bytes(sources) - feat_before  # gpuio only: mmap's page faults are not counted
    stores = {nt: s for nt, s in sources.items() if hasattr(s, "stats")}
    r.update(backend=backend, structure=structure, rank=rank, world_size=world, batch_size=cfg.batch_size,
             label=backend if len(cfg.structures) == 1 else f"{backend}/{structure}",
             step_ms=1000 * r["run_s"] / max(r["steps"], 1))
    _tiers(r, stores)  # the steps' tiers (before Belady, evaluation and the held batches read more)
    if rank == 0:  # at once, as the stores-ready line
        print(f"{r['label']}: {r['steps']} steps done at job time {time.perf_counter() - T_START:.0f} s", flush=True)
    # after the steps: what a run measures once they are done; r["cut"] names the phase in progress, kept with
    # the steps' figures if SIGTERM (an outer timeout) stops it
    try:
        r["cut"] = "after the steps"
        if trace is not None:  # before evaluation reads more
            r["cut"] = "Belady's MIN"
            per = {nt: store_vs_min(stores[nt], trace.get(nt, []), cfg.loader_lookahead) for nt in stores}
            keys = ("gpuio_bytes", "min_bytes", "window_min_bytes", "min_whole_bytes", "device_bytes",
                    "min_device_bytes")
            tot = {k: sum(p[k] for p in per.values()) for k in keys}
            div = (lambda a, b: a / b if b else float("nan"))
            r["belady"] = dict(per_type=per, lookahead=cfg.loader_lookahead, **tot,
                               ratio=div(tot["gpuio_bytes"], tot["min_bytes"]),
                               device_tier_ratio=div(tot["device_bytes"], tot["min_device_bytes"]),
                               ratio_whole=div(tot["gpuio_bytes"], tot["min_whole_bytes"]),
                               window_min_ratio=div(tot["window_min_bytes"], tot["min_bytes"]))
            trace.clear()
        if not r["capped"]:  # a model trained for fewer steps has no comparable accuracy
            r["cut"] = "evaluation"
            r["test_acc"] = accuracy(model, loader(graph, sources, ds.test_idx[: cfg.eval_nodes],
                                                   cfg.seed + 10_007, shuffle=False, steps=None))
        if timing:
            r["cut"] = "compute alone"
            r["load_only"] = r_load
            held = [b for _, b in zip(range(COMPUTE_ONLY_BATCHES),
                                      loader(graph, sources, ds.train_idx, cfg.seed + rank))]
            fresh_model = make_rgat(ds.edge_types, in_dims, ds.num_classes, cfg.hidden, cfg.heads, cfg.seed, dev)
            c = compute_only(fresh_model, held, torch.optim.Adam(fresh_model.parameters(), lr=cfg.lr))
            del held
            n = min(r["steps"], r_load["steps"])  # the same steps of both (a cap may have stopped either)
            per_step = c["run_s"] / max(c["steps"], 1)
            r["compute_only"] = dict(c, run_s_scaled=per_step * r["steps"])
            r["bound"] = dict(steps=n, run_s=at(r, n), load_s=at(r_load, n), compute_s=per_step * n,
                              compute_steps=c["steps"])
            r["vs_bound"] = r["bound"]["run_s"] / max(r["bound"]["load_s"], r["bound"]["compute_s"], 1e-9)
        r.pop("cut")  # every phase finished
        if cfg.save_params:
            params = {k: v.detach().cpu() for k, v in getattr(model, "module", model).state_dict().items()}
            torch.save(params, cfg.save_params + (f".rank{rank}" if world > 1 else ""))
    except _Stopped:
        raise _Stopped(r) from None
    return r


def _tiers(r: dict, stores: dict) -> None:
    """Hit rates per tier over the run's steps, from the feature stores' counters."""
    if stores:
        st = {nt: s.stats() for nt, s in stores.items()}
        req = sum(s["rows_requested"] for s in st.values()) or 1
        r.update(host_hit_rate=sum(s["rows_host"] for s in st.values()) / req,
                 gpu_hit_rate=sum(s["rows_gpu_cache"] for s in st.values()) / req,
                 device_rate=sum(s["rows_device"] for s in st.values()) / req,
                 per_type={nt: dict(host=s["host_hit_rate"], gpu=s["gpu_hit_rate"], storage=s["device_rate"])
                           for nt, s in st.items()})


def _end_at_last_step(r: dict) -> None:
    """A capped pass's time is the end of its last step (each step ends synchronised): its wall time also
    holds the wait for the loader's worker to finish the read in hand, which no step used (wall_s keeps it)."""
    r["wall_s"] = r["run_s"]
    if r.get("capped") and r["step_end_s"]:
        r["run_s"] = r["step_end_s"][-1]


def _release_memory() -> None:
    """Free what earlier runs left: objects, cached GPU blocks, and cached pinned host blocks (torch keeps
    freed pinned memory for reuse; in a memory cgroup it would shrink the next run's page cache)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        empty_host = (getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)
                      or getattr(torch._C, "_host_emptyCache", None))  # the older name
        if empty_host is not None:
            empty_host()


class _Stopped(Exception):
    """SIGTERM (an outer timeout): stop, report the runs that finished. args[0], when given: the run in
    progress, stopped after its steps (its step figures stand; r["cut"] names the phase that was cut)."""


def _on_sigterm(signum, frame):
    raise _Stopped()


def run(cfg: HeteroConfig, log=print) -> list[dict]:
    global T_START
    T_START = time.perf_counter()
    cfg = cfg.resolve()
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts: before any matmul
        torch.use_deterministic_algorithms(True, warn_only=True)  # an op without such a kernel warns, named
    rank, world, local = _dist(cfg.device)
    if world > 1 and cfg.device.startswith("cuda"):
        cfg.device = f"cuda:{local}"
    say = log if rank == 0 else (lambda *a, **k: None)
    if rank == 0:
        ds, reused = prepare_dataset(cfg, say)
    if world > 1:
        import torch.distributed as dist
        dist.barrier()  # rank 0 wrote the dataset; the others open it
    if rank != 0:
        ds, reused = prepare_dataset(cfg, say)
    if cfg.generate_only:
        say(f"{cfg.root}: {ds.num_nodes} nodes, {ds.num_edges:,} edges, {ds.feature_bytes() / 2**30:.2f} GiB "
            f"of features ({'reused' if reused else 'written'})")
        return []
    say(f"RGAT on {cfg.root}: {ds.num_nodes} nodes, {ds.num_edges:,} edges, "
        f"{ds.feature_bytes() / 2**30:.2f} GiB of features ({'reused' if reused else 'written'}); "
        f"{cfg.steps} steps of {cfg.batch_size} seeds, fan-outs {tuple(cfg.fanouts)}, structure {cfg.structure}, "
        f"device {cfg.device}, {world} rank(s)")
    mem = cgroup_memory()
    if mem is not None and mem["limit"] is not None:
        say(f"memory given: cgroup {mem['group']} limit {mem['limit'] / 2**30:.1f} GiB (anonymous memory and page "
            f"cache together); features {ds.feature_bytes() / mem['limit']:.1f} x the limit")
    else:
        say("memory given: no cgroup limit on this process (the page cache may hold the data; run under a memory "
            "cgroup for out-of-core figures, as `scripts/gpu.sh hetero` does)")
    scores = sample_scores(ds) if "gpuio" in cfg.backends and cfg.host_fraction > 0 else None
    pairs = cfg.run_list
    first_gpuio = next((i for i, (b, _) in enumerate(pairs) if b == "gpuio"), None)
    caps = parse_caps(cfg.time_cap)
    nominal = [cap_for(caps, f"{b}/{s}", b) for b, s in pairs]
    if first_gpuio is not None and cfg.timing:  # the loading-alone pass is a run of its own for the budget
        nominal.insert(first_gpuio, cap_for(caps, CAP_LOAD, "gpuio"))
    def left():  # seconds of the budget left (None: no budget)
        return cfg.budget - (time.perf_counter() - T_START) if cfg.budget else None
    hosts: dict = {}  # the gpuio runs' shared host buffers (one fill per job), freed before other runs
    results = []
    old = signal.signal(signal.SIGTERM, _on_sigterm) if threading.current_thread() is threading.main_thread() else None
    try:
        for i, (b, structure) in enumerate(pairs):
            timing = cfg.timing and i == first_gpuio
            j = i + (1 if first_gpuio is not None and cfg.timing and i > first_gpuio else 0)
            planned = plan_caps(nominal[j:], left())
            load_cap, cap = (planned[0], planned[1]) if timing else (0.0, planned[0])
            if b != "gpuio":
                hosts.clear()
            _release_memory()  # the last run's stores, pinned buffers included, leave the cgroup first
            if cfg.cold:
                if int(os.environ.get("LOCAL_RANK", "0")) == 0:
                    evict_page_cache(cfg.root)
                if world > 1:
                    import torch.distributed as dist
                    dist.barrier()  # no rank starts before the files are cold
            r = run_backend(b, ds, cfg, scores, rank, world, structure, cap=cap, load_cap=load_cap, timing=timing,
                            belady=cfg.belady and i == first_gpuio, hosts=hosts,
                            replan=lambda j=j: plan_caps(nominal[j + 1:], left())[0])
            if all(q != "gpuio" for q, _ in pairs[i + 1:]):
                hosts.clear()  # no later gpuio run: the pinned host buffers leave the cgroup now
            r["cgroup"] = cgroup_memory()
            # at once, so a run stopped by an outer timeout still shows the backends it finished
            say(f"done {r['label']}: {r['steps']} steps in {r['run_s']:.2f} s ({r['step_ms']:.1f} ms/step"
                f"{', capped at ' + format(cap, '.0f') + ' s' if r['capped'] else ''}), test accuracy "
                f"{r.get('test_acc', float('nan')):.3f} [job at {time.perf_counter() - T_START:.0f} s]")
            mine = {k: r[k] for k in ("rank", "run_s", "steps", "stall_s", "feature_bytes", "structure_bytes",
                                      "sample_s", "feature_s")}
            if world > 1:  # every rank's figures, for the aggregate throughput rank 0 prints
                import torch.distributed as dist
                r["ranks"] = [None] * world
                dist.all_gather_object(r["ranks"], mine)
            else:
                r["ranks"] = [mine]
            results.append(r)
    except _Stopped as e:
        part = e.args[0] if e.args else None
        if part is not None:  # its steps finished: their figures are reported, marked as cut
            part["cgroup"] = cgroup_memory()
            part["ranks"] = [{k: part[k] for k in ("rank", "run_s", "steps", "stall_s", "feature_bytes",
                                                   "structure_bytes", "sample_s", "feature_s")}]
            results.append(part)
            say(f"cut {part['label']}: {part['steps']} steps in {part['run_s']:.2f} s ({part['step_ms']:.1f} ms/step); "
                f"SIGTERM during {part['cut']}: its figures over the steps stand, what {part['cut']} gives is missing")
        say(f"stopped by SIGTERM at {time.perf_counter() - T_START:.0f} s (an outer timeout): the report covers the "
            f"{len(results) - (part is not None)} run(s) that finished" + (" and the steps of the one cut"
                                                                           if part is not None else ""))
        stopped = True
    else:
        stopped = False
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    if rank == 0:
        info = dict(steps=cfg.steps, warmup=cfg.warmup_steps, feature_bytes=ds.feature_bytes(),
                    num_edges=ds.num_edges, limit=mem["limit"] if mem else None,
                    struct_cache_mb=cfg.struct_cache_mb, disk_mbs=cfg.disk_mbs,
                    structure_file_bytes=sum(sum(relation_file_bytes(ds.relation_path(et))) for et in ds.edge_types))
        print_report(results, say, info)
        if cfg.json_out:
            with open(cfg.json_out, "w") as f:
                json.dump(dict(config=asdict(cfg), results=results), f, indent=1, default=str)
    if stopped:
        sys.stdout.flush()
        os._exit(143)  # the loader threads of the interrupted run may still be blocked
    if world > 1:
        import torch.distributed as dist
        dist.barrier()
        dist.destroy_process_group()
    return results
