"""Graph structure on storage: per-relation CSC TensorFiles built out of core and sampled through the
engine (`CSCFile`), or held in memory (`CSCMemory`)."""
from gpuio.graph.csc_file import (CSCFile, CSCMemory, build_csc, create_table, csc_chunks, edge_list_chunks,
                                  open_csc, write_rows)

__all__ = ["CSCFile", "CSCMemory", "build_csc", "create_table", "csc_chunks", "edge_list_chunks", "open_csc",
           "write_rows"]
