"""The pure share-partition machine (``share_partition``), its compact window (``window``), its
value types (``records``) and its snapshot codec (``snapshot``).

No asyncio, no clock, no metadata store, no web framework: time is an argument and I/O is the
driver's (an import-linter contract checks it).
"""
