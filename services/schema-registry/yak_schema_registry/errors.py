"""The registry's typed errors, each with Confluent's numeric ``error_code``.

Confluent's codes are the HTTP status followed by two digits of detail (``40401`` subject not
found); ``409`` (incompatible) has none. The domain raises these; ``api.errors`` turns them into
``{"error_code": ..., "message": ...}`` bodies in one table, never deeper.
"""

from __future__ import annotations

from typing import ClassVar

from yak.errors import YakError

__all__ = [
    "IncompatibleSchemaError",
    "InvalidCompatibilityLevelError",
    "InvalidModeError",
    "InvalidSchemaError",
    "InvalidVersionError",
    "OperationNotPermittedError",
    "ReferenceExistsError",
    "RegistryError",
    "SchemaNotFoundError",
    "SubjectCompatibilityNotConfiguredError",
    "SubjectModeNotConfiguredError",
    "SubjectNotFoundError",
    "SubjectNotSoftDeletedError",
    "SubjectSoftDeletedError",
    "VersionNotFoundError",
    "VersionNotSoftDeletedError",
    "VersionSoftDeletedError",
]


class RegistryError(YakError):
    """Base of the registry's errors; ``error_code`` is Confluent's number for it."""

    error_code: ClassVar[int] = 50001
    code = "SCHEMA_REGISTRY_ERROR"


class SubjectNotFoundError(RegistryError):
    """No (live) version is registered under the subject."""

    error_code = 40401
    code = "SUBJECT_NOT_FOUND"
    http_status = 404


class VersionNotFoundError(RegistryError):
    """The subject has no such version."""

    error_code = 40402
    code = "VERSION_NOT_FOUND"
    http_status = 404


class SchemaNotFoundError(RegistryError):
    """No schema has this id, or the subject holds no such schema."""

    error_code = 40403
    code = "SCHEMA_NOT_FOUND"
    http_status = 404


class SubjectSoftDeletedError(RegistryError):
    """The subject was soft-deleted already (delete it with ``permanent=true``)."""

    error_code = 40404
    code = "SUBJECT_SOFT_DELETED"
    http_status = 404


class SubjectNotSoftDeletedError(RegistryError):
    """A permanent delete of a subject that was not soft-deleted first."""

    error_code = 40405
    code = "SUBJECT_NOT_SOFT_DELETED"
    http_status = 404


class VersionSoftDeletedError(RegistryError):
    """The version was soft-deleted already."""

    error_code = 40406
    code = "VERSION_SOFT_DELETED"
    http_status = 404


class VersionNotSoftDeletedError(RegistryError):
    """A permanent delete of a version that was not soft-deleted first."""

    error_code = 40407
    code = "VERSION_NOT_SOFT_DELETED"
    http_status = 404


class SubjectCompatibilityNotConfiguredError(RegistryError):
    """The subject has no compatibility level of its own."""

    error_code = 40408
    code = "SUBJECT_COMPATIBILITY_NOT_CONFIGURED"
    http_status = 404


class SubjectModeNotConfiguredError(RegistryError):
    """The subject has no mode of its own."""

    error_code = 40409
    code = "SUBJECT_MODE_NOT_CONFIGURED"
    http_status = 404


class IncompatibleSchemaError(RegistryError):
    """The schema breaks the subject's compatibility level; ``details["messages"]`` say how."""

    error_code = 409
    code = "INCOMPATIBLE_SCHEMA"
    http_status = 409


class InvalidSchemaError(RegistryError):
    """The schema does not parse, or its type or references are wrong."""

    error_code = 42201
    code = "INVALID_SCHEMA"
    http_status = 422


class InvalidVersionError(RegistryError):
    """A version that is neither a positive integer nor ``latest``."""

    error_code = 42202
    code = "INVALID_VERSION"
    http_status = 422


class InvalidCompatibilityLevelError(RegistryError):
    """A compatibility level outside Confluent's seven."""

    error_code = 42203
    code = "INVALID_COMPATIBILITY_LEVEL"
    http_status = 422


class InvalidModeError(RegistryError):
    """A mode other than READWRITE, READONLY or IMPORT."""

    error_code = 42204
    code = "INVALID_MODE"
    http_status = 422


class OperationNotPermittedError(RegistryError):
    """The mode forbids the write (READONLY), or an id is given outside IMPORT mode."""

    error_code = 42205
    code = "OPERATION_NOT_PERMITTED"
    http_status = 422


class ReferenceExistsError(RegistryError):
    """Another schema references the version being deleted permanently."""

    error_code = 42206
    code = "REFERENCE_EXISTS"
    http_status = 422
