"""An HTTP ``Authorization`` header to a principal: ``Bearer <api key>`` or ``Basic <b64>``.

Checked with a ``SecurityCache`` (its argon2 checks, remembered successes, revocations taking
effect at once). Pure string handling plus the cache: no web framework, so any service's guard
can use it. Raises ``AuthenticationError`` for a missing, malformed, unknown or wrong
credential.
"""

from __future__ import annotations

import base64
import binascii

from yak.errors import AuthenticationError
from yak.security.cache import SecurityCache

__all__ = ["authenticate_header", "basic_credentials"]


async def authenticate_header(cache: SecurityCache, header: str) -> str:
    """The principal the header's credential authenticates as."""
    scheme, _, credential = header.partition(" ")
    match scheme.lower():
        case "bearer":
            return await cache.authenticate_api_key(credential.strip())
        case "basic":
            user, password = basic_credentials(credential)
            return await cache.authenticate_password(user, password)
    if header:
        raise AuthenticationError(f"unsupported authorization scheme {scheme!r}")
    raise AuthenticationError("this API needs credentials: an API key (Bearer) or Basic")


def basic_credentials(credential: str) -> tuple[str, str]:
    """``base64(user:password)`` → (user, password)."""
    try:
        text = base64.b64decode(credential.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise AuthenticationError("malformed Basic credentials") from None
    user, sep, password = text.partition(":")
    if not sep:
        raise AuthenticationError("malformed Basic credentials")
    return user, password
