"""``make bench-queue``'s parts (issue 30, item 6): share-group and group-poll throughput
(``throughput``), delayed-delivery lateness and the memory of a million pending delays
(``delays``), and the pure arithmetic they share (``calc``). ``loadtest.bench_queue`` runs
them on one cluster and writes ``loadtest/results/queue.json``."""
