"""The broker's disk layer: partition logs, segments, indexes, recovery. Imports no web, HTTP or etcd library."""
