"""Confluent v3 topic configs: list, get one, update one, reset one, and ``configs:alter``.

Every config of Yak's catalogue is listed with its value for the topic (its override, else the
default). Changes go to the active controller's admin API (which validates them: an unknown
name or a bad value is 400 / 40002) and answer 204 once this proxy's cache shows them;
``validate_only`` checks the values here and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fastapi import APIRouter, Request, Response

from yak.errors import InvalidConfigError, InvalidRequestError
from yak.metadata.cache import ClusterSnapshot
from yak.names import validate_topic_name
from yak.topic_config import CATALOGUE, validate_topic_configs
from yak_rest_proxy.api.v3.admin_routes import V3_TAG, caught_up, described, links_of
from yak_rest_proxy.api.v3.errors import ResourceMissingError
from yak_rest_proxy.api.v3.models import AlterConfigBatch, UpdateConfig
from yak_rest_proxy.api.v3.resources import collection, config_data
from yak_rest_proxy.api.v3.v3_route import V3Route
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["config_changes", "config_router"]

_JSON = "application/json"
_LIMIT = 1024 * 1024
_CONFIGS = "/clusters/{cluster_id}/topics/{topic}/configs"


def config_changes(batch: AlterConfigBatch) -> tuple[dict[str, str], list[str]]:
    """``(set, delete)`` of an ``:alter`` batch; an entry without operation is a SET, a SET
    needs a value; the last entry for a name wins, as in Kafka's incremental alter."""
    changes: dict[str, str | None] = {}
    for index, entry in enumerate(batch.data):
        operation = (entry.operation or "SET").upper()
        if operation == "SET" and entry.value is None:
            raise InvalidRequestError(f"data[{index}]: SET needs a value", kind="invalid_body")
        changes[entry.name] = entry.value if operation == "SET" else None
    set_configs = {name: value for name, value in changes.items() if value is not None}
    return set_configs, [name for name, value in changes.items() if value is None]


def _known(name: str) -> str:
    if name not in CATALOGUE:
        raise ResourceMissingError(f"Config '{name}' not found.")
    return name


def _shows(
    topic: str, set_configs: Mapping[str, str], deleted: list[str]
) -> Callable[[ClusterSnapshot], bool]:
    def done(snapshot: ClusterSnapshot) -> bool:
        record = snapshot.topics.get(topic)
        if record is None:
            return True
        ours = record.configs
        return all(n in ours for n in set_configs) and not any(n in ours for n in deleted)

    return done


def config_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix="/v3", tags=[V3_TAG], route_class=V3Route)

    async def alter(topic: str, set_configs: dict[str, str], deleted: list[str]) -> Response:
        validate_topic_name(topic)
        await runtime.coordinator().alter_topic_configs(
            topic, set_configs=set_configs, delete_configs=deleted
        )
        await caught_up(runtime, _shows(topic, set_configs, deleted))
        return Response(status_code=204)

    @router.get(_CONFIGS)
    async def list_configs(request: Request, cluster_id: str, topic: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        overrides = (await described(runtime, topic)).topics[topic].configs
        data = [config_data(links, topic, name, overrides) for name in CATALOGUE]
        url = links.url("topics", topic, "configs")
        return json_response(collection("KafkaTopicConfigList", url, data), _JSON)

    @router.get(_CONFIGS + "/{name}")
    async def get_config(request: Request, cluster_id: str, topic: str, name: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        overrides = (await described(runtime, topic)).topics[topic].configs
        return json_response(config_data(links, topic, _known(name), overrides), _JSON)

    @router.put(
        _CONFIGS + "/{name}", status_code=204, openapi_extra=openapi_body(UpdateConfig, _JSON)
    )
    async def update_config(request: Request, cluster_id: str, topic: str, name: str) -> Response:
        """Set the config (a null ``value`` resets it to the default)."""
        links_of(request, runtime, cluster_id)
        body = parse_model(UpdateConfig, await read_body(request, _LIMIT))
        if body.value is None:
            return await alter(topic, {}, [name])
        return await alter(topic, {name: body.value}, [])

    @router.delete(_CONFIGS + "/{name}", status_code=204)
    async def reset_config(request: Request, cluster_id: str, topic: str, name: str) -> Response:
        """Back to the default."""
        links_of(request, runtime, cluster_id)
        return await alter(topic, {}, [name])

    @router.post(
        _CONFIGS + ":alter", status_code=204, openapi_extra=openapi_body(AlterConfigBatch, _JSON)
    )
    async def alter_configs(request: Request, cluster_id: str, topic: str) -> Response:
        """Set and delete many configs in one change (``validate_only``: check, change nothing)."""
        links_of(request, runtime, cluster_id)
        batch = parse_model(AlterConfigBatch, await read_body(request, _LIMIT))
        set_configs, deleted = config_changes(batch)
        if batch.validate_only:
            await described(runtime, topic)
            validate_topic_configs(set_configs)
            for name in deleted:
                if name not in CATALOGUE:
                    raise InvalidConfigError(f"unknown topic config {name!r}", config=name)
            return Response(status_code=204)
        return await alter(topic, set_configs, deleted)

    return router
