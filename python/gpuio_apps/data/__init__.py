"""Graph data for the GNN jobs: synthetic power-law graphs written out of core, and Planetoid loaders. They
return a `gpuio.graph.GraphData`."""
from gpuio_apps.data.planetoid import find_dataset, load_planetoid
from gpuio_apps.data.synthetic import rmat_edges, synthetic_graph

__all__ = ["find_dataset", "load_planetoid", "rmat_edges", "synthetic_graph"]
