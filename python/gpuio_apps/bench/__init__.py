"""`gpuio bench`'s measurement logic: the engine against the in-tree raw reference (gpuio_apps._raw.raw_bench),
interleaved in one run on one data file, summarized as ratios (BENCHMARKS.md). The CLI (gpuio_apps.cli.bench)
only parses options and displays."""
from .datafile import create as create_data_file, parse_size
from .measure import raw_bench
from .report import summarize
from .runner import Options, run
from .workloads import RAW_GRID, WORKLOADS, RawConfig, Workload

__all__ = ["Options", "run", "summarize", "create_data_file", "parse_size", "WORKLOADS", "RAW_GRID", "RawConfig",
           "Workload", "raw_bench"]
