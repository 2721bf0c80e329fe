"""The ``yak`` command line: local cluster, topics, produce/consume, groups (grows by issue)."""
