"""The groups pages' pure helpers: the reset form as ``reset_offsets`` arguments, the rows
of a reset's preview."""

from __future__ import annotations

import pytest

from yak.api.groups import OffsetResetResult, PartitionOffsetChange
from yak.errors import InvalidRequestError
from yak_console.pages.groups import ResetArgs, parse_reset_form, reset_rows


@pytest.mark.parametrize(
    ("fields", "checked", "expected"),
    [
        ({"to": "earliest"}, [], ResetArgs("earliest")),
        ({"to": "latest", "force": "on"}, [], ResetArgs("latest", force=True)),
        ({"to": "offset", "offset": " 42 "}, [], ResetArgs("offset", offset=42)),
        (
            {"to": "timestamp", "timestamp": "2024-05-01T12:30"},
            [],
            ResetArgs("timestamp", timestamp=1_714_566_600_000),
        ),
        (
            {"to": "timestamp", "timestamp": "2024-05-01T12:30:15"},
            [],
            ResetArgs("timestamp", timestamp=1_714_566_615_000),
        ),
        (
            {"to": "earliest", "other_topics": "c, a ,,"},
            ["a", "b"],
            ResetArgs("earliest", topics=("a", "b", "c")),
        ),
    ],
)
def test_the_form_becomes_reset_arguments(
    fields: dict[str, str], checked: list[str], expected: ResetArgs
) -> None:
    assert parse_reset_form(fields, checked) == expected


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"to": "yesterday"},
        {"to": "timestamp"},
        {"to": "timestamp", "timestamp": "soon"},
        {"to": "timestamp", "timestamp": "1969-12-31T23:59"},
        {"to": "offset"},
        {"to": "offset", "offset": "-1"},
        {"to": "offset", "offset": "²"},
        {"to": "offset", "offset": str(2**63)},
    ],
)
def test_a_form_that_makes_no_reset_is_refused(fields: dict[str, str]) -> None:
    with pytest.raises(InvalidRequestError):
        parse_reset_form(fields)


def test_rows_give_the_lag_after_where_the_end_offset_is_known() -> None:
    result = OffsetResetResult(
        dry_run=True,
        partitions=[
            PartitionOffsetChange(topic="t", partition=0, previous=100, new=0),
            PartitionOffsetChange(topic="t", partition=1, previous=None, new=7),
            PartitionOffsetChange(topic="u", partition=0, previous=5, new=5),
        ],
    )
    rows = reset_rows(result, {("t", 0): 100, ("t", 1): 5})
    assert [(r.changed, r.lag_after) for r in rows] == [(True, 100), (True, 0), (False, None)]
