"""GNN jobs on gpuio: models (GraphSAGE/GCN/GAT), training loops, and the demo behind `gpuio demo`."""
