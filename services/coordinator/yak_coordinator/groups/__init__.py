"""Consumer groups, coordinator side (``docs/consumer-groups.md``).

The pure decisions are in ``yak_coordinator.decisions``: ``assignors`` (the server-side
assignors, ``range`` and ``uniform``) and ``group_reconcile`` (the next ``GroupState`` of one
group from its member records). Here, the drivers and the view:

- ``groups_view``: the coordinator's copy of the ``groups/`` keys, fed by a watch;
- ``group_coordinator``: the driver, one task per controller term, writing states to etcd;
- ``group_admin``: the admin API's read side (list and describe groups).
"""
