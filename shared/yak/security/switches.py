"""The security settings every service reads from its environment, read one way:
``YAK_SECURITY`` (``security_switch``: on/off, true/false, 1/0, anything else refused) and
``YAK_SUPER_USERS`` (``principal_list``: comma-separated principals, blanks dropped)."""

from __future__ import annotations

__all__ = ["principal_list", "security_switch"]

_ON, _OFF = ("on", "true", "1"), ("off", "false", "0")


def security_switch(text: str) -> bool:
    """``YAK_SECURITY``'s value as a bool; ValueError for anything else."""
    value = text.strip().lower()
    if value not in _ON + _OFF:
        raise ValueError(f"YAK_SECURITY must be on or off, not {text!r}")
    return value in _ON


def principal_list(text: str) -> tuple[str, ...]:
    """``YAK_SUPER_USERS``'s principals, in order."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
