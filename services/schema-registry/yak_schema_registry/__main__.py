"""``python -m yak_schema_registry``: the same as ``yak-schema-registry``."""

from yak_schema_registry.main import main

main()
