"""Benchmarks for hmem (run ``python -m bench.core --help``)."""
