"""JSON integers: what JSON Schema's ``integer`` takes, no more, no less."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from yak.api.json_int import ExactJsonInt, JsonInt, NonNegativeJsonInt


class _Body(BaseModel):
    plain: JsonInt = 0
    bounded: NonNegativeJsonInt | None = None


@pytest.mark.parametrize(("text", "value"), [("3", 3), ("3.0", 3), ("-2", -2)])
def test_integers_and_integral_floats_pass(text: str, value: int) -> None:
    assert _Body.model_validate_json(f'{{"plain": {text}}}').plain == value


@pytest.mark.parametrize("text", ["true", "false", '"3"', "3.5", "null"])
def test_booleans_strings_and_fractions_are_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        _Body.model_validate_json(f'{{"plain": {text}}}')


@pytest.mark.parametrize(
    ("text", "ok"), [("0", True), ("-1", False), (str(2**63 - 1), True), (str(2**63), False)]
)
def test_the_non_negative_form_is_bounded_to_int64(text: str, ok: bool) -> None:
    if ok:
        assert _Body.model_validate_json(f'{{"bounded": {text}}}').bounded == int(text)
    else:
        with pytest.raises(ValidationError):
            _Body.model_validate_json(f'{{"bounded": {text}}}')


def test_the_bounds_are_in_the_json_schema() -> None:
    schema = _Body.model_json_schema()["properties"]["bounded"]["anyOf"][0]
    assert schema == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}


class _Rate(BaseModel):
    rate: ExactJsonInt


@pytest.mark.parametrize(("value", "ok"), [(2**53, True), (2**53 + 1, False), (-1, False)])
def test_the_exact_form_stops_where_doubles_start_rounding(value: int, ok: bool) -> None:
    if ok:
        assert _Rate.model_validate_json(f'{{"rate": {value}}}').rate == value
    else:
        with pytest.raises(ValidationError):
            _Rate.model_validate_json(f'{{"rate": {value}}}')
