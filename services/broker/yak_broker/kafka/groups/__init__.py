"""Kafka's classic consumer groups at their coordinating broker (issue 32; docs/decisions.md,
"Kafka classic groups").

``state/`` is the pure machine of one group (no asyncio, no clock, no I/O: time is an
argument, answers go to an outbox; an import contract keeps it so). Beside it, the asyncio
side: ``rendezvous`` picks a group's coordinating broker, ``group_driver`` drives one group
(requests, timer, marker), ``coordinator`` holds the groups led here and their offsets (the
wire handlers' entry point, ``KafkaServer.groups``).
"""
