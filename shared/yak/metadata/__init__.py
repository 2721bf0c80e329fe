"""Cluster metadata in etcd: the keyspace, its typed values, and the store interface.

``keyspace`` builds and parses keys, ``models`` holds the stored values, ``store`` defines the
``MetadataStore`` interface with its two implementations in ``etcd_store`` (real etcd) and
``memory_store`` (tests). Import from those modules; this package re-exports nothing, so that
importing one of them never drags in the etcd client.
"""

__all__: list[str] = []
