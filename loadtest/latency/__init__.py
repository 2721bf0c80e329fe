"""The parts of ``make bench-latency`` (``python -m loadtest.bench_latency``): the pure figures —
the result rows (``rows``), CPU per record (``cpu``), the budget per hop's stage histograms
(``histograms``), the ``latency.json`` document with its headline and goals (``results``) and
the generated blocks of ``docs/performance.md`` (``page``) —, the broker data-plane probe that
runs in a process of the measured build's code (``probe``), the measurements made from the
benchmark's own process (``measure``) and the ``git worktree`` of the baseline build
(``baseline``).
"""
