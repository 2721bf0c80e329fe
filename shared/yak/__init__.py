"""Yak's shared library: record format, metadata keyspace and store, errors, clients and CLI.

Every service and client imports this package; it imports no service.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
