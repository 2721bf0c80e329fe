"""Share groups on the partition's leader (KIP-932's model; docs/decisions.md, "Share groups:
where their state lives").

``state/`` is the pure share-partition machine and its snapshot codec: no asyncio, no clock, no
store (an import contract keeps it so). The drivers that own the awaiting — reading the log,
persisting snapshots to ``__yak_share_state``, timers, the dead-letter produce — live beside it
in this package.
"""
