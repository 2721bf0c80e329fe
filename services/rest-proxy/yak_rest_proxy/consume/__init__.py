"""The consume side of the proxy, the twin of ``produce/``.

A poll, from the route to the fetch: ``api/native/group_routes.py`` (or ``fast_lane.py``,
``api/v2/consumer_routes.py``) → ``consumer.Consumers.poll`` → the member as this proxy holds
it (``holding/``: reconciled with its group by the pure protocol in ``membership/``) → one
long-polling fetch from the leaders (``reader.Reader``) → the positions moved in memory and
written behind (``holding/``). ``group_admin`` lists groups, their lag and resets offsets.

A share group's acquire, the point-to-point twin: ``api/native/share_routes.py`` →
``share/share_consumer.ShareConsumers.acquire`` → one long-polling ShareFetch per leader of the
group's partitions (KIP-932; the leaders hold the records' locks and delivery counts) → only the
acquired offsets decoded and rendered; acknowledgements go back per leader
(``share/acknowledger.py``).

Layers (import contracts in pyproject): ``consumer``, ``group_admin``, ``share`` over
``holding``, ``reader`` over ``membership``, which imports no asyncio, clock or store.
"""
