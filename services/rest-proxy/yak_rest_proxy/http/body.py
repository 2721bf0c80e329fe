"""Reading request bodies: size-limited, then parsed into a pydantic model with precise errors.

Bodies are read by hand rather than through FastAPI's body parameters so that the proxy, not the
framework, decides what a Content-Type means (see ``content``), an oversized body is refused
before it is all in memory, and a malformed JSON body (400) is told apart from a well-formed one
of the wrong shape (422 in the v2 dialect); a body's values have JSON's types, no coercion
(``_validate``). The expected shapes are still declared in OpenAPI
through ``openapi_body``. ``read_body`` is every service's one (``yak.web.body``), kept in
this module's surface for the routes.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from yak.errors import InvalidRequestError
from yak.web.body import read_body

__all__ = ["openapi_body", "parse_model", "read_body"]

_M = TypeVar("_M", bound=BaseModel)


def _where(problem: Any) -> str:
    return ".".join(str(part) for part in problem.get("loc", ())) or "body"


def _integral_float(problem: Any) -> bool:
    """Whether a strict validation error is only an integer written as ``3.0``."""
    given = problem.get("input")
    return problem.get("type") == "int_type" and isinstance(given, float) and given.is_integer()


def _validate(model: type[_M], body: bytes) -> _M:
    """``body`` as ``model`` with JSON's types, as the OpenAPI document states them: strict
    (``false`` is not the integer 0, nor ``"true"`` a boolean, nor ``"3"`` a number), except
    that an integral number written with a fraction (``3.0``) is the integer it equals, as
    JSON Schema's ``integer`` takes it."""
    try:
        return model.model_validate_json(body, strict=True)
    except ValidationError as exc:
        problems = exc.errors()
        if not problems or not all(_integral_float(p) for p in problems):
            raise
    return model.model_validate_json(body)  # the same, but 3.0 is taken as 3


def parse_model(model: type[_M], body: bytes, *, empty_ok: bool = False) -> _M:
    """``body`` as ``model``: 400 for malformed JSON, 422 naming the first wrong field."""
    if empty_ok and not body.strip():
        body = b"{}"
    try:
        return _validate(model, body)
    except ValidationError as exc:
        problems = exc.errors()
        if problems and problems[0].get("type") == "json_invalid":
            detail = problems[0].get("ctx", {}).get("error", "invalid JSON")
            raise InvalidRequestError(
                f"the body is not valid JSON: {detail}", kind="malformed_json"
            ) from None
        text = "; ".join(f"{_where(p)}: {p.get('msg', 'invalid')}" for p in problems[:3])
        raise InvalidRequestError(f"invalid request body: {text}", kind="invalid_body") from None


def openapi_body(
    model: type[BaseModel], *media_types: str, required: bool = True
) -> dict[str, Any]:
    """``openapi_extra`` declaring ``model`` as the request body under ``media_types``
    (``required=False``: the route takes no body as an empty one, ``parse_model(empty_ok)``).

    The model and the models it uses go to ``components/schemas`` through the
    ``x-yak-components`` key, which ``openapi.build_openapi`` moves there.
    """
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components = schema.pop("$defs", {})
    components[model.__name__] = schema
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    content = {media: {"schema": ref} for media in media_types}
    return {
        "requestBody": {"required": required, "content": content},
        "x-yak-components": components,
    }
