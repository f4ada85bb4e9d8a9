"""The papers' workloads on gpuio, each beside its baseline (docs/decisions/0006): out-of-core GEMM (`gemm`), external
sort (`sort`), vector add (`vecadd`), image resize (`resize`), GPT-2 load/train/checkpoint (`gpt2`, with
`checkpoint`: safetensors-compatible, block-aligned checkpoints). Every application runs on any gpuio store
(`store`: a file or RAID-0 over files), checks its result against an in-memory reference, and reports I/O
time, compute time and the ideal max(I/O, compute) beside its baseline; `gpuio bench apps` (`apps.bench`)
runs them all at one size and prints one table.
"""
