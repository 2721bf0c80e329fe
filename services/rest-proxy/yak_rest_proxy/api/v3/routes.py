"""The Confluent v3 API (``/v3``): its routers, in the order the app includes them.

``admin_routes`` (clusters, brokers, topics, partitions), ``config_routes`` (topic configs),
``group_routes`` (consumer groups, consumers, lags) and ``records_routes`` (produce, streaming
included). Every route answers errors in the v3 dialect (``errors.V3Route``).
"""

from __future__ import annotations

from fastapi import APIRouter

from yak_rest_proxy.api.v3.admin_routes import admin_router
from yak_rest_proxy.api.v3.config_routes import config_router
from yak_rest_proxy.api.v3.group_routes import group_router
from yak_rest_proxy.api.v3.records_routes import records_router
from yak_rest_proxy.consume.group_admin import GroupAdmin
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["v3_routers"]


def v3_routers(runtime: ProxyRuntime, groups: GroupAdmin) -> list[APIRouter]:
    """The v3 API's routers."""
    return [
        admin_router(runtime),
        config_router(runtime),
        group_router(runtime, groups),
        records_router(runtime),
    ]
