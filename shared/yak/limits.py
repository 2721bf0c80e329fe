"""Process limits every Yak service adjusts at start (issue 19).

A broker hosts thousands of partition replicas and every service holds a socket per client:
the common desktop soft limit of 1,024 open files is reached long before the machine's. The
hard limit is what an unprivileged process may raise its soft limit to, so each service does
that at start (``yak.web.serve.serve``), logging what it got; a failure is logged, never fatal.
The broker's segment files stay bounded anyway (its ``FileHandleCache``).
"""

from __future__ import annotations

import logging
import resource

__all__ = ["raise_open_files_limit"]

_log = logging.getLogger(__name__)


def raise_open_files_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return the soft limit in force."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError) as exc:
        _log.warning("open files: cannot read the limit (%s)", exc)
        return -1
    if soft == hard:
        _log.info("open files: soft limit %s (the hard limit)", _text(soft))
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as exc:
        # e.g. macOS refuses an unlimited soft limit; the service runs with what it has.
        _log.warning(
            "open files: soft limit stays %s, could not raise it to %s (%s)",
            _text(soft),
            _text(hard),
            exc,
        )
        return soft
    _log.info("open files: soft limit raised %s -> %s", _text(soft), _text(hard))
    return hard


def _text(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
