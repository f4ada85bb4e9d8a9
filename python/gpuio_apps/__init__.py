"""gpuio_apps: the applications of the gpuio library, shipped in the same wheel and kept apart from it
(docs/DESIGN.md, "Library and applications"). They use the library's public names only, as any user's program
would, and the library imports nothing of theirs (pyproject.toml's import contracts,
tests/python/project/test_layers.py):

- ``cli``: the ``gpuio`` command (``python -m gpuio`` and ``python -m gpuio_apps`` run it too)
- ``gnn``: the GNN jobs and models behind ``gpuio demo`` (GraphSAGE/GCN/GAT; RGAT on IGBH-shaped graphs)
- ``papers``: the papers' workloads beside their baselines (GEMM, sort, vector add, resize, GPT-2 checkpoints,
  ``papers.graph_analytics``: BFS/CC/SSSP on out-of-core CSR graphs)
- ``data``: dataset loaders and generators (Planetoid, synthetic power-law graphs, IGBH-shaped graphs)
- ``bench``: ``gpuio bench``'s measurements (the engine against the raw-device reference ``_raw``) and Belady's MIN
  (``bench.belady``: the offline optimum the caches are judged against)
- ``cluster``: the throwaway one-node Ceph cluster of the tests and demos (``gpuio cluster``)
- ``sim_report``: the ZnG platform study on the flash simulator (``gpuio sim zng``)
- ``baselines``: the row tables the demos and benchmarks compare against (np.memmap rows, zero rows);
  ``basic_volume``: GNStor's "Basic" synchronous librbd client, the volumes' baseline
- ``knobs``: the applications' own knob table (the cluster's); the library's table (gpuio.defaults) holds none
"""
