"""Wire formats of Yak's internal APIs (pure: no asyncio, no HTTP library).

``kafka_wire`` (with ``kafka_types`` and ``kafka_sasl``) is the internal plane in Kafka's
framing and schemas: produce, fetch and replication on the brokers' internal listeners.
``broker_wire`` holds the value types they carry and the HTTP data plane's frames (a JSON
header + raw RecordBatch bytes); ``broker_models`` the pydantic models of the broker's JSON
endpoints. The broker serves them; the broker client and the rest-proxy use them.
"""

__all__: list[str] = []
