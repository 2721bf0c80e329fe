"""Wire formats of Yak's internal HTTP APIs (pure: no asyncio, no HTTP library).

``broker_wire`` frames the broker's binary data plane (produce requests, fetch responses) and
encodes its small JSON messages; ``broker_models`` holds the pydantic models of the broker's
JSON endpoints. The broker serves them; the broker client, the rest-proxy and the SDK use them.
"""

__all__: list[str] = []
