"""The audit log: one JSON line per denied request and per administrative change.

Logger ``yak.audit``, level INFO, message = a JSON object::

    {"time": "2024-05-01T12:00:00.123+00:00", "principal": "User:alice",
     "action": "DELETE /api/v1/topics/{topic}", "resource": "TOPIC:orders",
     "operation": "DELETE", "result": "denied", "request_id": "…", "remote": "10.0.0.7:51234"}

``result`` is ``denied`` (no ACL allows it), ``unauthenticated`` (no or a bad credential; the
principal is ``ANONYMOUS``), ``throttled`` (refused unchecked after too many failed logins)
or ``allowed`` (an administrative change passed its checks; the change itself may still fail,
e.g. a topic that exists). The request id is the client's
``X-Request-Id`` header when it sends one, else a new one. ``install_audit_handler`` gives the
logger its own stderr handler in the service process; tests read it through the root logger.
Written by the rest-proxy's guard and security admin API and by the coordinator's admin guard.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

__all__ = ["AUDIT_LOGGER", "audit", "install_audit_handler"]

AUDIT_LOGGER = "yak.audit"
_log = logging.getLogger(AUDIT_LOGGER)


def audit(
    *,
    principal: str,
    action: str,
    result: str,
    resource: str = "",
    operation: str = "",
    request_id: str = "",
    remote: str = "",
) -> None:
    """Write one audit line."""
    if not _log.isEnabledFor(logging.INFO):
        return
    line = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "principal": principal,
        "action": action,
        "resource": resource,
        "operation": operation,
        "result": result,
        "request_id": request_id,
        "remote": remote,
    }
    _log.info(json.dumps(line))


def install_audit_handler() -> None:
    """Send audit lines to stderr as they are (once per process)."""
    if not _log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        _log.addHandler(handler)
        _log.setLevel(logging.INFO)
        _log.propagate = False
