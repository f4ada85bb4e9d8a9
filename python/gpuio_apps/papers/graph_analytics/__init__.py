"""BFS, CC and SSSP on an out-of-core CSR graph (docs/decisions/0005, 0006): the edges and weights live on storage
and are read through BaM-style device arrays (gpuio.DeviceArray) on the GPU, through TensorFile gathers of the
frontier's adjacency ranges on the CPU, or through the baselines (pread + copy, np.memmap + copy).

    g = generate_kronecker("g/", scale=20, device="cuda")          # Graph500 Kronecker, or load_edges(...)
    rp = torch.from_numpy(g.row_ptr).cuda()
    src = make_source("gpuio-array", g, "cuda", cache_bytes=1 << 30)
    level, parent, stats = bfs(rp, src, root=choose_root(g, 1))
    assert not validate_bfs(g, root, level, parent)
    gv = copy_to_volumes(g, "gv/", "rbd:POOL/IMAGE")   # col/weight on Ceph volumes (gpuio sources, in-memory)
"""
from .algos import (bfs, connected_components, expand, scipy_reference, sssp, sssp_window, validate_bfs,
                    validate_sssp, vertex_ranges)
from .csr import CSRGraph, build_csr, choose_root, copy_to_volumes, generate_kronecker, kronecker_edges, load_edges
from .sources import SOURCES, make_source

__all__ = ["CSRGraph", "SOURCES", "bfs", "build_csr", "choose_root", "connected_components", "copy_to_volumes",
           "expand",
           "generate_kronecker", "kronecker_edges", "load_edges", "make_source", "scipy_reference", "sssp", "sssp_window",
           "validate_bfs", "validate_sssp", "vertex_ranges"]
