"""Yak side by side with Redis Streams and NATS JetStream, in the OpenMessaging Benchmark's
shape: YAML workloads (``loadtest/workloads``), one driver per system, HDR latency windows, a
maximum-rate search, and a report (``docs/benchmarks.md``, ``loadtest/results/peers.json``).
Run it with ``python -m loadtest.peers`` (``make bench-peers``).
"""
