"""The rest-proxy's latency budget (issue 18): each stage of a produce and of a poll, timed.

Two histograms on the service's registry (``ServiceMetrics.registry``), in seconds, observed
once per request or per produce round — never per record — from ``time.perf_counter`` pairs:

``yak_proxy_produce_stage_seconds{stage}``

- ``read``: from the route's start to the whole body in memory;
- ``parse``: the body turned into records, checked, partitioned and handed to the producer
  (for an idempotent batch, ``POST …/batches``: parsed and checked);
- ``queue``: per produce round, how long its oldest record waited in its partition queue
  (enqueued → the round's start: the adaptive linger, or the wait behind a round in flight);
- ``sender``: per round, the round's start → its request handed to the broker client (the
  queues drained, batches encoded, a producer id fetched when a queue needs one; for an
  idempotent batch, encoding it);
- ``broker``: per round, the broker client's produce call: the request's encoding and
  transfer, the broker's work (its own stages are ``yak_broker_produce_stage_seconds``) and
  the answer's decoding (for an idempotent batch, every retry included);
- ``render``: the records' results → the response.

``yak_proxy_poll_stage_seconds{stage}`` (group polls of both dialects and the stateless
partition read; the latter has no ``reconcile`` and no ``save``):

- ``reconcile``: the member's state made current and the group protocol's member side applied
  (in memory on the proxy holding the instance; etcd only for an instance it takes over);
- ``fetch``: waiting for the brokers' fetches (a long poll counts its whole wait);
- ``decode``: the fetched record batches decoded into records;
- ``render``: the records turned into the response body;
- ``save``: the new positions recorded (in memory; written to etcd behind, every
  ``YAK_CONSUMER_POSITIONS_FLUSH_MS``, or here at each poll when that is 0).

What a request spends before its route runs (the HTTP server, middleware, the guard) is the
difference between ``yak_http_request_duration_seconds`` and the sum of the stages.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from yak.observability.metrics import STAGE_BUCKETS

__all__ = ["PollStats", "ProduceStats", "ProxyStats"]


class ProduceStats:
    """The produce stages (see the module docstring); label lookups done once."""

    __slots__ = ("broker", "parse", "queue", "read", "render", "sender")

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        histogram = Histogram(
            "yak_proxy_produce_stage_seconds",
            "Time of each stage of a produce through the rest-proxy.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=registry if registry is not None else CollectorRegistry(),
        )
        self.read = histogram.labels("read")
        self.parse = histogram.labels("parse")
        self.queue = histogram.labels("queue")
        self.sender = histogram.labels("sender")
        self.broker = histogram.labels("broker")
        self.render = histogram.labels("render")

    def on_request(self, read_s: float, parse_s: float, render_s: float) -> None:
        """A produce request's own stages (the round's are the producer's)."""
        self.read.observe(read_s)
        self.parse.observe(parse_s)
        self.render.observe(render_s)


class PollStats:
    """The poll stages (see the module docstring); label lookups done once."""

    __slots__ = ("decode", "fetch", "reconcile", "render", "save")

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        histogram = Histogram(
            "yak_proxy_poll_stage_seconds",
            "Time of each stage of a poll (group or stateless read) through the rest-proxy.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=registry if registry is not None else CollectorRegistry(),
        )
        self.reconcile = histogram.labels("reconcile")
        self.fetch = histogram.labels("fetch")
        self.decode = histogram.labels("decode")
        self.render = histogram.labels("render")
        self.save = histogram.labels("save")


class ProxyStats:
    """Every latency histogram of one proxy process, on one registry."""

    __slots__ = ("poll", "produce")

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.produce = ProduceStats(registry)
        self.poll = PollStats(registry)
