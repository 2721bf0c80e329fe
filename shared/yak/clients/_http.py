"""What the typed HTTP clients share: turning an error response into its typed error."""

from __future__ import annotations

import httpx

from yak.errors import UnknownServerError, YakError, error_for_code

__all__ = ["error_from_response"]


def error_from_response(response: httpx.Response) -> YakError:
    """The typed error of an ``{"code", "message", "details"}`` body, else UNKNOWN_SERVER_ERROR."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        details = body.get("details")
        if not isinstance(details, dict):
            details = {}
        return error_for_code(body["code"], str(body.get("message", "")), **details)
    return UnknownServerError(
        f"HTTP {response.status_code} from {response.request.url}: {response.text[:200]}"
    )
