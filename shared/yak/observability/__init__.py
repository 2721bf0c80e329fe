"""What every Yak service shares to be observed: Prometheus metrics, JSON logs, request ids.

- ``request_id``: the current request's id (a contextvar), and its propagation on outgoing
  HTTP calls;
- ``logging``: the log setup of every service (``YAK_LOG_FORMAT=text|json``);
- ``metrics``: a service's registry (HTTP and etcd latency, process metrics) and ``/metrics``;
- ``http``: the pure ASGI middleware that times each request and sets its id.

See docs/observability.md for every metric and the log format.
"""
