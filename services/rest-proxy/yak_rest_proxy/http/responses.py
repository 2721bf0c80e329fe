"""JSON responses with the negotiated media type, serialised by orjson."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response
from pydantic import BaseModel

__all__ = ["json_response"]


def json_response(body: BaseModel | Any, media_type: str, status_code: int = 200) -> Response:
    """``body`` (a model or plain JSON data) as ``media_type``."""
    data = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
    return Response(orjson.dumps(data), status_code=status_code, media_type=media_type)
