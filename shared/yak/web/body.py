"""``read_body``: a request's whole body, refused once it passes a byte limit.

Every Yak service that reads a body by hand (the broker's data plane, the rest-proxy's routes,
the coordinator forwarding an admin request to its controller) reads it here, so an oversized
body gets the same answer everywhere: 413 ``MESSAGE_TOO_LARGE`` (``MessageTooLargeError`` with
``limit``, and ``size`` when the client declared it) — at once when ``content-length`` already
says so, else as soon as the chunks read pass the limit, never after holding it all in memory.

A client that disconnects before its body is whole raises starlette's ``ClientDisconnect`` by
default; a caller that would rather answer it with a typed error names the error class
(the broker: ``NetworkError``, since nobody is left to read an answer).
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request

from yak.errors import MessageTooLargeError, YakError

__all__ = ["read_body"]


async def read_body(
    request: Request, limit: int, *, on_disconnect: type[YakError] | None = None
) -> bytes:
    """The whole body of ``request``; ``MessageTooLargeError`` (413) beyond ``limit`` bytes.

    ``on_disconnect``: the error raised (instead of ``ClientDisconnect``) when the client goes
    away before sending the whole body.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdecimal() and int(declared) > limit:
        raise MessageTooLargeError(
            f"the request body is {int(declared):,} bytes; the limit is {limit:,}",
            size=int(declared),
            limit=limit,
        )
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise MessageTooLargeError(
                    f"the request body is over the limit of {limit:,} bytes", limit=limit
                )
            if chunk:  # starlette ends every stream with b"": keep one chunk alone
                chunks.append(chunk)
    except ClientDisconnect:
        if on_disconnect is None:
            raise
        raise on_disconnect("the client disconnected before sending its whole request") from None
    return b"".join(chunks)  # a single chunk (the usual case) comes back as is, uncopied
