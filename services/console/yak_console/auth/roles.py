"""Console roles: what a logged-in user may change through the console. Pure.

Three roles, like a Kafka UI's:

==========  ==================================================================
viewer      every page, the message browser and its export; changes nothing
operator    viewer + produce, offset resets (and their preview), create topics
admin       operator + edit topic configs, delete topics, delete groups
==========  ==================================================================

A user's role comes from ``YAK_CONSOLE_ROLES`` (``User:alice=admin,User:bob=operator``); a
principal not named there is ``admin`` when the API says it is a super-user, else
``YAK_CONSOLE_DEFAULT_ROLE`` (``viewer``). The role only narrows what the console offers: every
change is still the public API's call with the user's own credential, so the proxy's ACLs
decide as well (an operator without TOPIC CREATE sees the API's 403).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = ["ROLE_PERMITS", "Permit", "Role", "parse_roles", "role_of"]


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Permit(StrEnum):
    """A kind of change the console can make."""

    PRODUCE = "produce"
    RESET_OFFSETS = "reset_offsets"
    CREATE_TOPIC = "create_topic"
    ALTER_CONFIGS = "alter_configs"
    DELETE_TOPIC = "delete_topic"
    DELETE_GROUP = "delete_group"


_OPERATOR = frozenset({Permit.PRODUCE, Permit.RESET_OFFSETS, Permit.CREATE_TOPIC})

ROLE_PERMITS: Mapping[Role, frozenset[Permit]] = {
    Role.VIEWER: frozenset(),
    Role.OPERATOR: _OPERATOR,
    Role.ADMIN: frozenset(Permit),
}


def role_of(principal: str, *, super_user: bool, roles: Mapping[str, Role], default: Role) -> Role:
    """The configured role, else admin for a super-user, else the default."""
    if principal in roles:
        return roles[principal]
    return Role.ADMIN if super_user else default


def parse_roles(text: str) -> dict[str, Role]:
    """``User:alice=admin, User:bob=operator`` → principal → role (``ValueError`` if bad)."""
    roles: dict[str, Role] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        principal, sep, role = item.partition("=")
        principal = principal.strip()
        if not sep or not principal.startswith("User:") or len(principal) == len("User:"):
            raise ValueError(f"write each role as User:<name>=<role>, got {item.strip()!r}")
        try:
            roles[principal] = Role(role.strip().lower())
        except ValueError:
            choices = ", ".join(r.value for r in Role)
            raise ValueError(f"unknown role {role.strip()!r} (choose {choices})") from None
    return roles
