"""Integer fields that take exactly what JSON Schema's ``integer`` takes.

Pydantic's default (lax) ``int`` also takes ``true``/``false`` and numeric strings, which an
OpenAPI client is told are not integers; its strict ``int`` refuses ``1.0``, which JSON
Schema counts as the integer 1. These are strict after turning an integral float into its
int: ``3`` and ``3.0`` pass, ``true``, ``"3"`` and ``3.5`` are refused. Bounds go inside, so
that the OpenAPI document states them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, Strict

__all__ = ["ExactJsonInt", "JsonInt", "NonNegativeJsonInt", "PartitionJsonInt", "integral"]


def integral(value: object) -> object:
    """An integral float as its int; anything else as it is (for the strict check after)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, Strict(), BeforeValidator(integral)]
#: At least 0 and at most int64, the width the answers carry.
NonNegativeJsonInt = Annotated[int, Strict(), Field(ge=0, le=2**63 - 1), BeforeValidator(integral)]
#: At least 0 and at most 2**53, the integers every JSON reader keeps exact (I-JSON, RFC 7493):
#: past that a client's (and a fuzzer's) doubles round, and 2**63 - 1 reads as 2**63.
ExactJsonInt = Annotated[int, Strict(), Field(ge=0, le=2**53), BeforeValidator(integral)]
#: A partition number: at least 0, at most int32 (Kafka's width).
PartitionJsonInt = Annotated[int, Strict(), Field(ge=0, le=2**31 - 1), BeforeValidator(integral)]
