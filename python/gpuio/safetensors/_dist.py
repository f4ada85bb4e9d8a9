"""One checkpoint onto every rank of a torch.distributed process group, each byte read from storage once
(`load_file(..., process_group=group)`, as InstantTensor names it).

The ranks first agree on what each wants (all of it, a share by name, or a slice of each tensor), then split
the union of the wanted bytes among them, about equal bytes each, cut between rows: a part only one rank wants
is read by that rank (up to its share), the rest in contiguous runs of the files. Each rank reads its parts with
the module's reader onto the device the group's backend carries (its GPU for NCCL, host memory for gloo), and
the ranks send each other the parts they want, point to point, in rounds that every rank cuts alike (NVLink
carries them between GPUs). Every tensor returned owns its storage
(torch.empty on the device; host tensors on a 256-byte boundary).

Failures: a bad argument or an unreadable checkpoint on any rank is reported on every rank (a ValueError naming
it where it is one) before any data moves; a failed read on any rank likewise, before the exchange. A rank
that dies leaves the others waiting only as long as the group's timeout.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ._format import SafetensorError, TensorInfo
from ._read import read_into_buffers
from ._source import Checkpoint, Selection, resolve_device

ROUND_COPY_BYTES_MAX = 1 << 30  # per round of the exchange: the senders' copies of parts sliced past dimension 0
ROUND_MESSAGES_MAX = 1024       # point-to-point messages per round (one batch_isend_irecv on each rank)
HOST_ALIGN_BYTES = 256      # host tensors start here, as the module's others do

Shard = Callable[[str, tuple], Any]


@dataclass(frozen=True)
class _Want:
    """One rank's part of one tensor: rows [r0, r1) of dimension 0 (all of a 0-d tensor: [0, 1)), then `rest`
    (slices of dimensions 1.. as (start, stop, step)) applied to them."""
    r0: int
    r1: int
    rest: tuple = ()

    def index(self) -> tuple:
        """The index of a part's rows: all of dimension 0, then `rest`."""
        return (slice(None),) + tuple(slice(*s) for s in self.rest)


@dataclass(frozen=True)
class _Piece:
    """Rows [a, b) of one tensor, read from storage by rank `reader`."""
    name: str
    a: int
    b: int
    reader: int


def _rows(info: TensorInfo) -> int:
    shape = info.torch_shape
    return shape[0] if shape else 1


def _row_bytes(info: TensorInfo) -> int:
    r = _rows(info)
    return info.nbytes // r if r else 0


def _want_of(name: str, info: TensorInfo, part: Any) -> _Want | None:
    """What shard(name, shape) returned, checked: None (all), False (nothing), a slice of dimension 0 (step 1)
    or a tuple of slices (dimension 0's of step 1, the others' steps positive)."""
    shape = info.torch_shape
    rows = _rows(info)
    if part is False:
        return None
    if part is None:
        return _Want(0, rows)
    parts = part if isinstance(part, tuple) else (part,)
    bad = f"shard({name!r}, {tuple(info.shape)}) returned {part!r}"
    if not all(isinstance(p, slice) for p in parts) or not parts:
        raise ValueError(f"{bad}: give None (all of it), False (none of it), a slice of dimension 0 or a tuple "
                         "of slices")
    if len(parts) > len(shape):
        raise ValueError(f"{bad}: {len(parts)} slices for a tensor of {len(shape)} dimensions")
    try:
        spans = [p.indices(n) for p, n in zip(parts, shape)]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{bad}: {e}") from None
    if spans[0][2] != 1:
        raise ValueError(f"{bad}: dimension 0 must be sliced with step 1")
    if any(s[2] < 0 for s in spans[1:]):
        raise ValueError(f"{bad}: steps must be positive (as in torch)")
    r0, r1 = spans[0][0], max(spans[0][0], spans[0][1])
    rest = tuple(spans[1:])
    while rest and rest[-1] == (0, shape[len(rest)], 1):  # trailing whole dimensions: no index
        rest = rest[:-1]
    return _Want(r0, r1, rest)


def _local_wants(ckpt: Checkpoint, tensors: Selection, shard: Shard | None) -> dict[str, _Want]:
    names = ckpt.select(tensors)
    out: dict[str, _Want] = {}
    for n in names:
        info = ckpt.where[n][1]
        w = _want_of(n, info, shard(n, tuple(info.shape)) if shard is not None else None)
        if w is not None:
            out[n] = w
    return out


def _fingerprint(ckpt: Checkpoint) -> str:
    h = hashlib.sha1()
    for n in ckpt.keys():
        t = ckpt.where[n][1]
        h.update(f"{n}\0{t.dtype}\0{t.shape}\0{t.nbytes}\n".encode())
    return f"{len(ckpt.where)} tensors, sha1 {h.hexdigest()[:12]}"


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def plan_reads(ckpt: Checkpoint, wants: list[dict[str, _Want]], ranks: int) -> list[_Piece]:
    """Who reads which rows: the wanted rows of every tensor (the union over the ranks) in file order, each row in
    one piece, about total/ranks bytes per rank (within a few rows). A part only one rank wants is read by that
    rank, up to its share of the bytes (a tensor-parallel share then crosses no link); the rest (parts several
    want, and a rank's wants past its share) is cut into contiguous runs that fill each rank up to its share."""
    by_name: dict[str, list[tuple[int, int]]] = {}
    for w in wants:
        for n, x in w.items():
            by_name.setdefault(n, []).append((x.r0, x.r1))
    segs = []  # (file, begin, name, a, b, row bytes, the one rank that wants these rows or -1)
    for n, spans in by_name.items():
        f, info = ckpt.where[n]
        rb = _row_bytes(info)
        if rb == 0:
            continue  # no bytes: the ranks that want it make it empty
        for a, b in _merge(spans):
            who = [q for q in range(ranks) if n in wants[q] and wants[q][n].r0 < b and wants[q][n].r1 > a]
            segs.append((f, info.begin + a * rb, n, a, b, rb, who[0] if len(who) == 1 else -1))
    segs.sort()
    total = sum((b - a) * rb for _, _, _, a, b, rb, _ in segs)
    share = [total * (k + 1) // ranks - total * k // ranks for k in range(ranks)]
    load = [0] * ranks
    pieces: list[_Piece] = []
    pool = []  # (name, a, b, row bytes) left for the runs
    for _, _, n, a, b, rb, one in segs:
        if one >= 0 and load[one] < share[one]:
            take = min(b, a + -(-(share[one] - load[one]) // rb))  # up to the share, the last row whole
            pieces.append(_Piece(n, a, take, one))
            load[one] += (take - a) * rb
            a = take
        if b > a:
            pool.append((n, a, b, rb))
    room = [max(0, share[k] - load[k]) for k in range(ranks)]
    bounds = [0]  # the rooms add up to at least the pool's bytes (a rank over its share has no room)
    for r in room:
        bounds.append(bounds[-1] + r)  # run k: pool bytes [bounds[k], bounds[k + 1])
    at = 0  # pool bytes before this part
    for n, a, b, rb in pool:
        # the row nearest each run's start (within this part), so rows [cut[k], cut[k + 1]) are run k's
        cut = [a] + [min(b, max(a, a + round((bounds[k] - at) / rb))) for k in range(1, ranks)] + [b]
        pieces += [_Piece(n, cut[k], cut[k + 1], k) for k in range(ranks) if cut[k + 1] > cut[k]]
        at += (b - a) * rb
    return pieces


def _backend_device(group: Any, device: torch.device) -> torch.device:
    """Where the bytes travel: the rank's GPU for NCCL (this rank's current device), host memory for gloo."""
    import torch.distributed as dist

    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and (device.type == "cuda" or "gloo" not in backend):
        return torch.device("cuda", torch.cuda.current_device())
    if "gloo" in backend:
        return torch.device("cpu")
    raise ValueError(f"process_group's backend {backend!r}: gpuio.safetensors sends over 'nccl' or 'gloo'")


def _empty(shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    nbytes = math.prod(shape) * dtype.itemsize
    if device.type == "cuda" or nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    from ..engine import aligned_empty

    return torch.from_numpy(aligned_empty(nbytes, HOST_ALIGN_BYTES)).view(dtype).reshape(shape)


def _check_all(group: Any, rank: int, mine: Any, what: str) -> list:
    """all_gather_object of (error or None, payload); raises on every rank when any rank's error is set: that
    rank's own exception there, a ValueError (or RuntimeError) naming the rank elsewhere."""
    import torch.distributed as dist

    err, payload = mine
    got: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(got, (None if err is None else (type(err).__name__, str(err), isinstance(err, ValueError)),
                                 payload), group=group)
    for k, (e, _) in enumerate(got):
        if e is not None:
            if k == rank:
                raise err
            kind = ValueError if e[2] else RuntimeError
            raise kind(f"load_distributed: rank {k} failed {what}: {e[0]}: {e[1]}")
    return [p for _, p in got]


def load_distributed(filename: Any, *, device: Any, process_group: Any, tensors: Selection = None,
                     shard: Shard | None = None, stats: dict | None = None) -> dict[str, torch.Tensor]:
    """The tensors this rank wants of a checkpoint, read once across the ranks of `process_group` and sent to the
    ranks that want them. Every rank of the group must call it with the same checkpoint.

    filename: as load_file's. device: as load_file's ("cuda": this rank's current device). tensors: as
    load_file's (names or a predicate; this rank's choice). shard: None (this rank takes all of each tensor
    chosen) or shard(name, shape) -> None (all of it), False (none of it), a slice of dimension 0 (step 1) or a
    tuple of slices: this rank's part. stats (optional dict): bytes_read (this rank's bytes from storage),
    bytes_received, bytes_sent, seconds, tensors, and the read's data_path."""
    import torch.distributed as dist

    t0 = time.perf_counter()
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("process_group: torch.distributed is not initialized (dist.init_process_group first)")
    if not isinstance(process_group, dist.ProcessGroup):
        raise ValueError(f"process_group={process_group!r} is not a torch.distributed ProcessGroup")
    group = process_group
    rank, ranks = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError("process_group: this process is not a member of it")

    ckpt: Checkpoint | None = None
    err: BaseException | None = None
    wants_here: dict[str, _Want] = {}
    finger = ""
    try:
        if shard is not None and not callable(shard):
            raise ValueError(f"shard={shard!r}: give None or a callable shard(name, shape)")
        if stats is not None and not isinstance(stats, dict):
            raise ValueError(f"stats={stats!r}: give a dict or None")
        target = resolve_device(device)
        comm = _backend_device(group, target)
        ckpt = Checkpoint(filename)
        wants_here = _local_wants(ckpt, tensors, shard)
        finger = _fingerprint(ckpt)
    except Exception as e:  # reported on every rank below, before any data moves
        err = e
    try:
        got = _check_all(group, rank, (err, (finger, {n: (w.r0, w.r1, w.rest) for n, w in wants_here.items()})),
                         "checking its arguments")
        assert ckpt is not None
        if len({g[0] for g in got}) > 1:
            seen = "; ".join(f"rank {k}: {g[0]}" for k, g in enumerate(got))
            raise ValueError(f"filename: the ranks opened different checkpoints ({seen})")
        wants = [{n: _Want(*x) for n, x in g[1].items()} for g in got]
        out, st = _load(ckpt, group, rank, ranks, wants, comm)
    finally:
        if ckpt is not None:
            ckpt.close()
    if comm != target:
        out = {n: t.to(target) for n, t in out.items()}
    if stats is not None:
        stats.update(st, seconds=time.perf_counter() - t0, tensors=len(out), ranks=ranks, device=str(target))
    return out


def _load(ckpt: Checkpoint, group: Any, rank: int, ranks: int, wants: list[dict[str, _Want]],
          comm: torch.device) -> tuple[dict[str, torch.Tensor], dict]:
    import torch.distributed as dist

    t0 = time.perf_counter()
    pieces = plan_reads(ckpt, wants, ranks)
    mine = [p for p in pieces if p.reader == rank]
    # read this rank's run (every piece under a name of its own: a tensor may come in two parts)
    err: Exception | None = None
    read_stats: dict = {}
    typed: dict[int, torch.Tensor] = {}
    try:
        by_file: dict[int, list[TensorInfo]] = {}
        for i, p in enumerate(mine):
            f, info = ckpt.where[p.name]
            rb = _row_bytes(info)
            by_file.setdefault(f, []).append(TensorInfo(f"{i}", "U8", ((p.b - p.a) * rb,), info.begin + p.a * rb,
                                                        info.begin + p.b * rb))
        if by_file:
            bufs, read_stats = read_into_buffers(ckpt, by_file, comm)
            for f, infos in by_file.items():
                buf, where = bufs[f]
                for t in infos:
                    p = mine[int(t.name)]
                    info = ckpt.where[p.name][1]
                    raw = buf[where[t.name]:where[t.name] + t.nbytes]
                    dtype = info.torch_dtype
                    if raw.data_ptr() % dtype.itemsize:
                        raw = raw.clone()
                    typed[int(t.name)] = raw.view(dtype).reshape((p.b - p.a, *info.torch_shape[1:]))
    except Exception as e:  # told to every rank before the exchange, which would wait for this rank's parts
        err = e
    t1 = time.perf_counter()
    _check_all(group, rank, (err, None), "reading its part of the checkpoint")
    t2 = time.perf_counter()

    # this rank's tensors, and the messages of the exchange in one order on every rank
    out: dict[str, torch.Tensor] = {}
    for n, w in wants[rank].items():
        info = ckpt.where[n][1]
        full = torch.empty(info.torch_shape, dtype=info.torch_dtype, device="meta")
        part = full.reshape((1,)) if not info.torch_shape else full[w.r0:w.r1][w.index()]
        out[n] = _empty(tuple(part.shape) if info.torch_shape else (), info.torch_dtype, comm)
    sent = received = 0
    # the messages, each reader's in file order, interleaved by how far into its run each is (every reader sends
    # in every round, rather than one reader to all the others while the rest wait), then cut into rounds
    queued: list[tuple[int, int, tuple]] = []
    at = [0] * ranks
    for p in pieces:
        for q in range(ranks):
            got = wants[q].get(p.name)
            if got is None:
                continue
            w = got
            lo, hi = max(p.a, w.r0), min(p.b, w.r1)
            if hi <= lo:
                continue
            nbytes = _msg_bytes(ckpt.where[p.name][1], w, hi - lo)
            copy = nbytes if w.rest and p.reader != q else 0  # rows of a part whole past dim 0: sent in place
            queued.append((at[p.reader], p.reader, (p, q, lo, hi, w, copy)))
            at[p.reader] += nbytes
    queued.sort(key=lambda m: (m[0], m[1]))
    rounds: list[list[tuple]] = [[]]
    round_bytes = 0
    for _, _, msg in queued:
        if rounds[-1] and (round_bytes + msg[5] > ROUND_COPY_BYTES_MAX or len(rounds[-1]) >= ROUND_MESSAGES_MAX):
            rounds.append([])
            round_bytes = 0
        rounds[-1].append(msg)
        round_bytes += msg[5]
    index_of = {p: i for i, p in enumerate(mine)}
    t3 = time.perf_counter()
    for msgs in rounds:
        ops = []
        for tag, (p, q, lo, hi, w, _) in enumerate(msgs):
            if p.reader != rank and q != rank:
                continue
            info = ckpt.where[p.name][1]
            if p.reader == rank:
                src = _src_part(typed[index_of[p]], info, w, lo - p.a, hi - p.a)
                if q == rank:  # read here for here
                    dst = _dst_view(out, p.name, info, w, lo, hi)
                    dst.copy_(src.reshape(dst.shape))
                    continue
                ops.append(dist.P2POp(dist.isend, _bytes(src), dist.get_global_rank(group, q), group, tag))
                sent += src.numel() * src.element_size()
            else:
                dst = _dst_view(out, p.name, info, w, lo, hi)
                ops.append(dist.P2POp(dist.irecv, _bytes(dst), dist.get_global_rank(group, p.reader), group, tag))
                received += dst.numel() * dst.element_size()
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
    if comm.type == "cuda":
        torch.cuda.current_stream(comm).synchronize()
    # bytes_read: this rank's wanted bytes from storage (the ranks' add up to the wanted bytes); storage_bytes:
    # what its reader took, gaps of less than a block between two parts read through included
    st = {"bytes_read": sum((p.b - p.a) * _row_bytes(ckpt.where[p.name][1]) for p in mine),
          "storage_bytes": int(read_stats.get("bytes", 0)), "bytes_received": received, "bytes_sent": sent,
          "pieces_read": len(mine), "rounds": len(rounds),
          # where the time went: planning and this rank's read; waiting for the others' reads; the exchange
          "read_s": t1 - t0, "wait_s": t2 - t1, "plan_exchange_s": t3 - t2, "exchange_s": time.perf_counter() - t3}
    if "data_path" in read_stats:
        st["data_path"] = read_stats["data_path"]
    return out, st


def _msg_bytes(info: TensorInfo, w: _Want, rows: int) -> int:
    full = torch.empty(info.torch_shape or (1,), dtype=info.torch_dtype, device="meta")
    return math.prod(full[:rows][w.index()].shape) * info.torch_dtype.itemsize


def _dst_view(out: dict[str, torch.Tensor], name: str, info: TensorInfo, w: _Want, lo: int, hi: int) -> torch.Tensor:
    t = out[name]
    return t if not info.torch_shape else t[lo - w.r0:hi - w.r0]


def _src_part(piece: torch.Tensor, info: TensorInfo, w: _Want, lo: int, hi: int) -> torch.Tensor:
    if not info.torch_shape:
        return piece.reshape(())
    return piece[lo:hi][w.index()].contiguous()


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's bytes as a 1-D uint8 view (every dtype travels so, NCCL and gloo alike)."""
    return t.reshape(-1).view(torch.uint8)
