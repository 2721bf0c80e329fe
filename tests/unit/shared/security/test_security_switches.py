"""YAK_SECURITY and YAK_SUPER_USERS, read one way by every service."""

from __future__ import annotations

import pytest

from yak.security.switches import principal_list, security_switch


@pytest.mark.parametrize(
    ("text", "on"),
    [("on", True), (" TRUE ", True), ("1", True), ("off", False), ("false", False), ("0", False)],
)
def test_the_switch_reads_on_and_off_in_their_spellings(text: str, on: bool) -> None:
    assert security_switch(text) is on


def test_anything_else_is_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match="YAK_SECURITY must be on or off, not 'yes'"):
        security_switch("yes")


def test_principals_keep_their_order_and_drop_blanks() -> None:
    assert principal_list(" User:a, ,User:b,") == ("User:a", "User:b")
