"""Benchmarks of sktree_lmc (run as ``python -m benchmarks.<name>`` from the repository root)."""
