"""The broker's disk layer: partition logs, segments, indexes and recovery.

Imports no web, HTTP or etcd library (an import-linter contract checks it).
"""
