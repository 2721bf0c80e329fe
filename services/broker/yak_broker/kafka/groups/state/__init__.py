"""The pure classic-group machine (``classic_group``), who is in a group (``roster``), one
member (``member``) and the value types (``records``).

No asyncio, no clock, no metadata store, no network: time is an argument, the answers to parked
JoinGroups and SyncGroups go to an outbox the driver drains.
"""
