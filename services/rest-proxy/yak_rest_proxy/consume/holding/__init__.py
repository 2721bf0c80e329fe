"""The consumer instances this proxy holds: the drivers of the pure member protocol
(``consume.membership``) against etcd — its adapter (``member_store``), one watch per group
(``group_watch``), and the held members (``members``)."""
