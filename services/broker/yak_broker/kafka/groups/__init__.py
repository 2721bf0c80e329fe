"""Kafka's classic consumer groups at their coordinating broker (issue 32; docs/decisions.md,
"Kafka classic groups").

``state/`` is the pure machine of one group (no asyncio, no clock, no I/O: time is an
argument, answers go to an outbox); the asyncio driver that feeds it requests and timer ticks
and writes committed offsets to the metadata store sits beside it.
"""
