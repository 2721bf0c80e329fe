"""The parts of ``make bench-latency`` (``python -m loadtest.bench_latency``, which parses the
command line and runs the stages in order): the pure figures — the result rows (``rows``), CPU
per record (``cpu``), the budget per hop's stage histograms (``histograms``), the
``latency.json`` document with its headline and goals (``results``) and the generated blocks of
``docs/performance.md`` (``page``) —; what a run measures (``options``); the cluster of one
build (``cluster``), every measurement of one system in order (``systems``), the measurements
made from the benchmark's own process (``measure``) and the budget per hop scraped around them
(``budget``); the broker data-plane probe that runs in a process of the measured build's code
(``probe``); the ``git worktree`` of the baseline build (``baseline``); and the tables printed
(``terminal``).
"""
