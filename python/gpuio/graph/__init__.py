"""Graph layer (above the cache, below pyg and the loaders): the in-memory CSC of a graph and the one parser of
every graph form the package accepts (`to_csc`), hotness scores that rank rows for the cache's host buffer
(`degree_scores`, `pagerank_scores`), and graph structure on storage: per-relation CSC TensorFiles built out
of core and sampled through the engine (`CSCFile`, one page-cache budget shared over a graph's relation files
by `split_struct_cache`), or held in memory (`CSCMemory`); and `GraphData`, a
node-classification graph (edges, labels, splits, feature table) as the dataset loaders of gpuio_apps.data
give it."""
from gpuio.graph.csc import CSC, csc_from_edge_index, to_csc
from gpuio.graph.csc_file import (STRUCT_CACHE_BYTES_DEFAULT, CSCFile, CSCMemory, build_csc, create_table,
                                  csc_chunks, edge_list_chunks, open_csc, relation_file_bytes, split_struct_cache,
                                  write_rows)
from gpuio.graph.graph_data import GraphData, coalesce_undirected, random_split
from gpuio.graph.hot import degree_scores, pagerank_scores

__all__ = ["CSC", "csc_from_edge_index", "to_csc", "degree_scores", "pagerank_scores",
           "CSCFile", "CSCMemory", "build_csc", "create_table", "csc_chunks", "edge_list_chunks", "open_csc",
           "write_rows", "split_struct_cache", "relation_file_bytes", "STRUCT_CACHE_BYTES_DEFAULT", "GraphData",
           "coalesce_undirected", "random_split"]
