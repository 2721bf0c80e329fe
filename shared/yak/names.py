"""Validation of topic and consumer-group names.

Names become file paths (``<data>/<topic>-<partition>/``) and etcd keys, so they follow Kafka's
rule: 1-249 characters from ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``. Kafka also warns
that ``.`` and ``_`` collide in metric names; Yak accepts both, as Kafka does.
"""

from __future__ import annotations

import re

from yak.errors import InvalidGroupIdError, InvalidTopicError

__all__ = [
    "INTERNAL_TOPIC_PREFIX",
    "MAX_NAME_LENGTH",
    "NAME_CHARACTER",
    "NAME_PATTERN",
    "RESERVED_NAMES",
    "validate_group_id",
    "validate_topic_name",
]

MAX_NAME_LENGTH = 249
#: One legal character.
NAME_CHARACTER = "[a-zA-Z0-9._-]"
#: A name of legal characters, as a regular expression Python and JSON Schema (ECMA 262) read
#: alike (the OpenAPI documents state it: ``yak.web.openapi``): ``(?!\n)`` because Python's
#: ``$`` also matches before a final newline, which ECMA's does not.
NAME_PATTERN = f"^{NAME_CHARACTER}+$(?!\\n)"
#: Names made only of legal characters that are still refused.
RESERVED_NAMES = (".", "..")
#: Topic names Yak keeps for its own topics: users may read them, not create or change them.
INTERNAL_TOPIC_PREFIX = "__yak_"
_LEGAL = re.compile(NAME_PATTERN)


def _problem(name: str, what: str) -> str | None:
    if not name:
        return f"{what} name is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"{what} name is {len(name)} characters long; the maximum is {MAX_NAME_LENGTH}"
    if name in RESERVED_NAMES:
        return f"{what} name cannot be '.' or '..'"
    if not _LEGAL.fullmatch(name):
        bad = sorted({ch for ch in name if not _LEGAL.fullmatch(ch)})
        shown = ", ".join(repr(ch) for ch in bad)
        return (
            f"{what} name {name!r} contains illegal characters {shown}; "
            "only ASCII letters, digits, '.', '_' and '-' are allowed"
        )
    return None


def validate_topic_name(name: str) -> str:
    """Return ``name`` if it is a legal topic name, else raise InvalidTopicError."""
    problem = _problem(name, "topic")
    if problem is not None:
        raise InvalidTopicError(problem, topic=name)
    return name


def validate_group_id(group_id: str) -> str:
    """Return ``group_id`` if it is a legal consumer group id, else raise InvalidGroupIdError."""
    problem = _problem(group_id, "group")
    if problem is not None:
        raise InvalidGroupIdError(problem, group=group_id)
    return group_id
