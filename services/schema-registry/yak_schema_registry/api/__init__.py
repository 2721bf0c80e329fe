"""The HTTP layer: Confluent's Schema Registry API as thin FastAPI routes."""
