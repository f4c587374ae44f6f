"""Benchmark harness reproducing "Linear Mode Connectivity in Differentiable Tree Ensembles".

Run ``python -m benchmarks.lmc --help``; ``docs/benchmarks.md`` has the commands, tables and
figures of a full run. Modules: :mod:`.core` (data, model cache, interpolation, experiments),
:mod:`.mlp` (the MLP baseline of Table 2), :mod:`.report` (tables and figures), :mod:`.cli`.
"""
