"""Node-classification models for the GNN jobs: GraphSAGE (default), GCN, GAT — two-layer PyG convs
operating on a sampled subgraph (edge_index only, so no torch-sparse is needed)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

MODELS = ("sage", "gcn", "gat")


class GNN(torch.nn.Module):
    def __init__(self, kind: str, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2,
                 dropout: float = 0.5, heads: int = 4):
        super().__init__()
        if kind not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {kind!r}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.convs = torch.nn.ModuleList()
        d_in = in_dim
        for i in range(num_layers):
            last = i == num_layers - 1
            d_out = out_dim if last else hidden
            if kind == "sage":
                conv = SAGEConv(d_in, d_out)
            elif kind == "gcn":
                conv = GCNConv(d_in, d_out)
            elif last:
                conv = GATConv(d_in, d_out, heads=1)
            else:  # hidden GAT layers concatenate `heads` heads of hidden // heads channels
                d_out = max(1, hidden // heads) * heads
                conv = GATConv(d_in, d_out // heads, heads=heads)
            self.convs.append(conv)
            d_in = d_out
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x
