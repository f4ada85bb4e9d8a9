"""PyTorch Geometric integration: remote-backend FeatureStore/GraphStore over gpuio, and a pure-PyTorch
neighbour sampler (no pyg-lib / torch-sparse needed)."""
from gpuio.pyg.feature_store import PygFeatureStore
from gpuio.pyg.graph_store import GraphStore
from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler, hetero_feature_store
from gpuio.pyg.hetero_loader import HeteroBatchLoader
from gpuio.pyg.node_loader import NodeLoader
from gpuio.pyg.sampler import NeighborSampler

__all__ = ["PygFeatureStore", "GraphStore", "NeighborSampler", "HeteroGraphStore",
           "HeteroNeighborSampler", "HeteroBatchLoader", "NodeLoader", "hetero_feature_store"]
