"""The native quota admin API: ``/api/v1/security/quotas[/{principal}]``.

Reads over ``QuotaStore`` (etcd ``security/quotas/<principal>``); writes sent to the active
controller (``runtime.coordinator()``), like the users and ACLs next door, since the proxy's etcd
user may not write ``security/``. They work with security on or off, need CLUSTER ALTER
(listing and reading: CLUSTER DESCRIBE, see ``route_acls``), write the audit log, and after a
write wait until this proxy's copy reflects the revision the coordinator answered, so the
client's next request here already meets the new quota (other proxies follow their watch
within milliseconds).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from yak.api.records import API_PREFIX
from yak.api.security import QuotaBody, QuotaInfo, QuotaList
from yak.security.audit import audit
from yak.security.quota_store import QuotaConfig, quota_principal
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.quotas.quotas import ANONYMOUS, QuotaKind
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import current_access

__all__ = ["quota_router"]

_TAG = "native security"
_JSON = "application/json"
_BODY_LIMIT = 64 * 1024  # two numbers: a larger body answers 413


def quota_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/security/quotas", tags=[_TAG])
    store = runtime.quota_store

    def info(principal: str, quota: QuotaConfig) -> QuotaInfo:
        return QuotaInfo(
            principal=principal,
            produce_bytes_per_s=quota.produce_bytes_per_s,
            fetch_bytes_per_s=quota.fetch_bytes_per_s,
            effective_produce_bytes_per_s=runtime.quotas.rate(QuotaKind.PRODUCE, principal),
            effective_fetch_bytes_per_s=runtime.quotas.rate(QuotaKind.FETCH, principal),
        )

    async def changed(request: Request, principal: str, revision: int) -> None:
        access = current_access.get()
        audit(
            principal=access.principal if access is not None else ANONYMOUS,
            action=f"{request.method} /quotas/{{principal}}",
            result="ok",
            resource=f"QUOTA:{principal}",
            request_id=request.headers.get("x-request-id", ""),
            remote=f"{request.client.host}:{request.client.port}" if request.client else "",
        )
        await runtime.quota_overrides.wait_for_revision(revision)

    @router.get("", response_model=QuotaList)
    async def list_quotas() -> Response:
        """Every principal's override, and this proxy's defaults."""
        found = await store.list()
        answer = QuotaList(
            default_produce_bytes_per_s=runtime.settings.quota_produce_bytes_per_s,
            default_fetch_bytes_per_s=runtime.settings.quota_fetch_bytes_per_s,
            quotas=[info(p, q) for p, q in sorted(found.items())],
        )
        return json_response(answer, _JSON)

    @router.get("/{principal}", response_model=QuotaInfo)
    async def get_quota(principal: str) -> Response:
        """The principal's override (404 ``RESOURCE_NOT_FOUND`` if it has none)."""
        return json_response(info(principal, await store.get(principal)), _JSON)

    @router.put(
        "/{principal}", response_model=QuotaInfo, openapi_extra=openapi_body(QuotaBody, _JSON)
    )
    async def set_quota(request: Request, principal: str) -> Response:
        """Set the principal's override; it applies to its very next request on every proxy."""
        body = parse_model(QuotaBody, await read_body(request, _BODY_LIMIT))
        quota = QuotaConfig(body.produce_bytes_per_s, body.fetch_bytes_per_s)
        written = await runtime.coordinator().set_quota(
            quota_principal(principal), quota.produce_bytes_per_s, quota.fetch_bytes_per_s
        )
        revision = written.revision
        await changed(request, principal, revision)
        return json_response(info(principal, quota), _JSON)

    @router.delete("/{principal}", status_code=204)
    async def delete_quota(request: Request, principal: str) -> Response:
        """Remove the override: the proxy's defaults apply again."""
        revision = (await runtime.coordinator().delete_quota(quota_principal(principal))).revision
        await changed(request, principal, revision)
        return Response(status_code=204)

    return router
