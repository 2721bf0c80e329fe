"""Typed HTTP clients of Yak's services (async, httpx); errors come back as ``YakError``s."""

from yak.clients.admin import AdminClient
from yak.errors import NetworkError

__all__ = ["AdminClient", "NetworkError"]
