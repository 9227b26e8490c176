"""The benchmark suite: ``python -m bench`` (``make bench``); see docs/benchmarks/README.md."""
