"""What the typed HTTP clients share: turning an error response into its typed error, and
putting a name into a URL path.

``segment`` percent-encodes one path segment (a topic, group, member or user name) so the
server sees exactly that name: without it ``../x`` or ``a/b`` would be resolved or split into
*another* path by the HTTP client, and a NUL would not make a URL at all. ``.`` and ``..``
are sent as ``%2E`` and ``%2E%2E``, which no client resolves as dot segments (RFC 3986 §6.2.2.3
applies to the literal dots). Legal names (``[a-zA-Z0-9._-]``) come out unchanged.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx

from yak.errors import UnknownServerError, YakError, error_for_code

__all__ = ["error_from_response", "segment"]


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


def segment(name: str | int) -> str:
    """``name`` as one URL path segment (see the module docstring)."""
    text = quote(str(name), safe="")
    return text.replace(".", "%2E") if text in (".", "..") else text
