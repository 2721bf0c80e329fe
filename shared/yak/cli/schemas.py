"""``yak schemas``: the schema registry from the command line (docs/schema-registry.md).

Subjects, their versions, one version's schema, a diff between two versions, registering and
checking a schema file, compatibility levels, deletes — over Confluent's API
(``yak.sdk.schema_registry``). The registry is ``--registry-url`` (or
``YAK_SCHEMA_REGISTRY_URL``), else the ``schema-registry`` process of
``<data-dir>/cluster.json`` (``yak up --schema-registry``), else ``http://127.0.0.1:9460``
(``yak up``'s port for it). A secure ``yak up`` cluster's CA and admin API key are used unless
``--api-key`` (or ``--user`` and ``YAK_PASSWORD``) says otherwise.

A registry error prints ``error: <error_code>: message`` and exits with status 1; ``check``
exits with status 1 when the schema is incompatible, so scripts can gate on it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, run_or_exit
from yak.cli.secure import apply_cluster_security, cluster_api_key
from yak.sdk.schema_registry import (
    RegisteredSchema,
    SchemaRegistryClient,
    SchemaRegistryError,
    readable_text,
    schema_diff,
)

__all__ = ["DEFAULT_REGISTRY_URL", "app", "registry_url", "schema_type_of"]

_T = TypeVar("_T")

DEFAULT_REGISTRY_URL = "http://127.0.0.1:9460"
_DATA_DIR = Path(".yak")
_TYPES_BY_SUFFIX = {".avsc": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}

app = typer.Typer(no_args_is_help=True, help="Subjects and schemas of the schema registry.")

RegistryUrlOption = Annotated[
    str | None,
    typer.Option(
        "--registry-url",
        envvar="YAK_SCHEMA_REGISTRY_URL",
        help="Schema registry URL (default: the schema-registry in <data-dir>/cluster.json, "
        f"else {DEFAULT_REGISTRY_URL}).",
    ),
]
UserOption = Annotated[
    str | None, typer.Option("--user", help="User name for Basic auth (password: YAK_PASSWORD).")
]
PasswordOption = Annotated[str | None, typer.Option(envvar="YAK_PASSWORD", hidden=True)]
TypeOption = Annotated[
    str | None,
    typer.Option(
        "--type", help="AVRO, JSON or PROTOBUF (default: from the suffix .avsc/.json/.proto)."
    ),
]


def registry_url(url: str | None, data_dir: Path) -> str:
    """The registry to use (see the module docstring)."""
    apply_cluster_security(data_dir)
    if url:
        return url
    try:
        document = json.loads((data_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return DEFAULT_REGISTRY_URL
    processes = document.get("processes") if isinstance(document, dict) else None
    for process in processes if isinstance(processes, list) else []:
        if isinstance(process, dict) and process.get("name") == "schema-registry":
            return str(process.get("url") or DEFAULT_REGISTRY_URL)
    return DEFAULT_REGISTRY_URL


def schema_type_of(path: Path, given: str | None) -> str:
    """The type named, else the one the file's suffix implies, else AVRO."""
    if given:
        return given.upper()
    return _TYPES_BY_SUFFIX.get(path.suffix.lower(), "AVRO")


class _Target:
    """Where and as whom to call the registry: the options every command shares."""

    def __init__(
        self,
        url: str | None,
        data_dir: Path,
        api_key: str | None,
        user: str | None,
        password: str | None,
    ) -> None:
        self.url = registry_url(url, data_dir)
        self.user, self.password = user, password
        self.api_key = None if user else cluster_api_key(api_key, data_dir)

    def call(self, action: Callable[[SchemaRegistryClient], Awaitable[_T]]) -> _T:
        """``action`` on a client of the registry; a registry error prints Confluent's code."""

        async def run() -> _T:
            client = SchemaRegistryClient(
                self.url, api_key=self.api_key, username=self.user, password=self.password
            )
            async with client:
                try:
                    return await action(client)
                except SchemaRegistryError as exc:
                    typer.echo(f"error: {exc.error_code}: {exc.message}", err=True)
                    raise typer.Exit(1) from None

        try:
            return run_or_exit(run())
        except ValueError as exc:  # a user without a password
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        typer.echo(f"error: cannot read {path}: {exc.strerror}", err=True)
        raise typer.Exit(1) from None


def _show(schema: RegisteredSchema) -> None:
    typer.echo(
        f"subject {schema.subject}  version {schema.version}  id {schema.id}  "
        f"type {schema.schema_type}"
    )
    for reference in schema.references:
        typer.echo(f"reference {reference.name} -> {reference.subject} v{reference.version}")
    typer.echo(readable_text(schema), nl=False)


def _target(
    url: str | None, data_dir: Path, api_key: str | None, user: str | None, password: str | None
) -> _Target:
    return _Target(url, data_dir, api_key, user, password)


@app.command("subjects")
def subjects(
    prefix: Annotated[str | None, typer.Option(help="Only subjects starting so.")] = None,
    deleted: Annotated[bool, typer.Option(help="Soft-deleted subjects too.")] = False,
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """List the subjects, one a line."""
    target = _target(url, data_dir, api_key, user, password)
    for subject in target.call(lambda c: c.subjects(prefix=prefix, deleted=deleted)):
        typer.echo(subject)


@app.command("versions")
def versions(
    subject: str,
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """List a subject's live versions, one a line."""
    target = _target(url, data_dir, api_key, user, password)
    for version in target.call(lambda c: c.versions(subject)):
        typer.echo(str(version))


@app.command("show")
def show(
    subject: str,
    version: Annotated[str, typer.Argument(help="A version number or latest.")] = "latest",
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """Print one version: subject, version, id, type, references, then the schema."""
    target = _target(url, data_dir, api_key, user, password)
    _show(target.call(lambda c: c.version(subject, version)))


@app.command("diff")
def diff(
    subject: str,
    old: Annotated[str, typer.Argument(help="The version to diff from.")],
    new: Annotated[str, typer.Argument(help="The version to diff to.")] = "latest",
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """A unified diff between two versions of a subject (JSON schemas indented)."""
    target = _target(url, data_dir, api_key, user, password)

    async def both(client: SchemaRegistryClient) -> list[str]:
        return schema_diff(await client.version(subject, old), await client.version(subject, new))

    typer.echo("".join(target.call(both)), nl=False)


@app.command("register")
def register(
    subject: str,
    file: Annotated[Path, typer.Argument(help="The schema file (.avsc, .json, .proto).")],
    schema_type: TypeOption = None,
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """Register a schema file under a subject; print its global id."""
    text, kind = _read(file), schema_type_of(file, schema_type)
    target = _target(url, data_dir, api_key, user, password)
    typer.echo(f"id {target.call(lambda c: c.register(subject, text, kind))}")


@app.command("check")
def check(
    subject: str,
    file: Annotated[Path, typer.Argument(help="The schema file (.avsc, .json, .proto).")],
    schema_type: TypeOption = None,
    version: Annotated[
        str | None, typer.Option(help="Check against this version only (default: the level's).")
    ] = None,
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """Whether a schema file could be registered under the subject's compatibility level;
    exit status 1, with the reasons, when it could not."""
    text, kind = _read(file), schema_type_of(file, schema_type)
    target = _target(url, data_dir, api_key, user, password)
    compatible, reasons = target.call(lambda c: c.check(subject, text, kind, version=version))
    if compatible:
        typer.echo("compatible")
        return
    typer.echo("incompatible")
    for reason in reasons:
        typer.echo(f"  {reason}")
    raise typer.Exit(1)


@app.command("config")
def config(
    subject: Annotated[str | None, typer.Argument(help="A subject (default: global).")] = None,
    set_level: Annotated[
        str | None,
        typer.Option("--set", help="BACKWARD, FORWARD, FULL, their _TRANSITIVE forms, NONE."),
    ] = None,
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """Print the compatibility level in force (the subject's, else the global one), or set it."""
    target = _target(url, data_dir, api_key, user, password)
    if set_level is None:
        typer.echo(target.call(lambda c: c.compatibility(subject)))
    else:
        typer.echo(target.call(lambda c: c.set_compatibility(set_level, subject)))


@app.command("delete")
def delete(
    subject: str,
    version: Annotated[str | None, typer.Option(help="Delete this version only.")] = None,
    permanent: Annotated[
        bool, typer.Option(help="Delete for good (after a soft delete); ids stay readable.")
    ] = False,
    url: RegistryUrlOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: ApiKeyOption = None,
    user: UserOption = None,
    password: PasswordOption = None,
) -> None:
    """Soft-delete a subject (or one version); print the versions deleted."""
    target = _target(url, data_dir, api_key, user, password)
    if version is None:
        deleted = target.call(lambda c: c.delete_subject(subject, permanent=permanent))
    else:
        deleted = [target.call(lambda c: c.delete_version(subject, version, permanent=permanent))]
    for number in deleted:
        typer.echo(str(number))
