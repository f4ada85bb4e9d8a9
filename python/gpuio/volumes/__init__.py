"""Ceph volumes for gpuio (see cluster.py and the package docs)."""
