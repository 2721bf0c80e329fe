"""Benchmark drivers: one per system, all behind the interface of ``base``."""
