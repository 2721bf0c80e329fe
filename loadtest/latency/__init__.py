"""The parts of ``make bench-latency`` (``python -m loadtest.bench_latency``): the pure figures
(``stats``), the broker data-plane probe that runs in a process of the measured build's code
(``probe``), the measurements made from the benchmark's own process (``measure``) and the
``git worktree`` of the baseline build (``baseline``).
"""
