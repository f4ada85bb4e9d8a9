"""Graph data for the GNN jobs: synthetic power-law graphs written out of core, and Planetoid loaders."""
from gpuio.data.graph import GraphData, coalesce_undirected, random_split
from gpuio.data.planetoid import find_dataset, load_planetoid
from gpuio.data.synthetic import rmat_edges, synthetic_graph

__all__ = ["GraphData", "coalesce_undirected", "random_split", "find_dataset", "load_planetoid", "rmat_edges", "synthetic_graph"]
