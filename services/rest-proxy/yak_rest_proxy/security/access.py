"""The request's principal and authorizer, for checks that happen below the routes.

The guard (``guard.py``) sets the request's ``Access`` in ``current_access`` when security is
on; code that only learns the resource names deep down (the reader, which sees the topics a
consumer fetches) or that answers with a list (``GET /topics``) asks here. With security off
nothing is set and every check passes, so the data path pays one context-variable read.
``Access`` and ``CurrentAccess`` are every service's (``yak.web.route_guard``).
"""

from __future__ import annotations

from yak.web.route_guard import ANONYMOUS, Access, CurrentAccess

__all__ = ["ANONYMOUS", "Access", "current_access", "require", "visible"]

current_access = CurrentAccess("yak_access")
#: Check every name (no-op with security off); ``TOPIC_AUTHORIZATION_FAILED`` & co. if denied.
require = current_access.require
#: The names the principal may ``operation`` (all of them with security off).
visible = current_access.visible
