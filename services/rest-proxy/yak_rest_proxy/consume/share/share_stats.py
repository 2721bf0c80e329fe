"""The proxy's share-group figures on ``/metrics`` (docs/observability.md).

``yak_proxy_share_requests_total{operation, outcome}``: acquires and acknowledgement requests
(``operation`` ``acquire`` or ``acknowledge``; ``outcome`` ``ok`` or the error code);
``yak_proxy_share_request_seconds{operation}``: their latency, an acquire's long poll included;
``yak_proxy_share_records_total{operation}``: records acquired, and acknowledgement entries
applied per type (``accept``, ``release``, ``reject``, ``renew``). Observed once per request.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from yak.observability.metrics import STAGE_BUCKETS

__all__ = ["ShareStats"]


class ShareStats:
    """The share-group counters and histograms of one proxy (see the module docstring)."""

    __slots__ = ("_records", "_requests", "_seconds", "registry")

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.registry = registry
        self._requests = Counter(
            "yak_proxy_share_requests",
            "Share-group acquires and acknowledgement requests through the rest-proxy.",
            ["operation", "outcome"],
            registry=registry,
        )
        self._seconds = Histogram(
            "yak_proxy_share_request_seconds",
            "Latency of share-group acquires (long poll included) and acknowledgements.",
            ["operation"],
            buckets=(*STAGE_BUCKETS, 10.0, 30.0),
            registry=registry,
        )
        self._records = Counter(
            "yak_proxy_share_records",
            "Records acquired and acknowledgement entries applied, by operation.",
            ["operation"],
            registry=registry,
        )

    def observe(self, operation: str, seconds: float, outcome: str = "ok") -> None:
        """One request of ``operation`` answered after ``seconds`` with ``outcome``."""
        self._requests.labels(operation, outcome).inc()
        self._seconds.labels(operation).observe(seconds)

    def count(self, operation: str, records: int) -> None:
        """``records`` more acquired (``acquire``) or acknowledged as ``operation``."""
        if records:
            self._records.labels(operation).inc(records)
