import pytest

from yak import errors
from yak.errors import (
    NotLeaderOrFollowerError,
    UnknownServerError,
    YakError,
    error_for_code,
)


def _all_error_classes() -> list[type[YakError]]:
    """Every concrete error class (the YakError base is abstract on the wire)."""
    classes = [obj for obj in vars(errors).values() if isinstance(obj, type)]
    return [cls for cls in classes if issubclass(cls, YakError) and cls is not YakError]


def test_codes_are_unique_so_a_wire_code_names_one_class() -> None:
    codes = [cls.code for cls in _all_error_classes()]
    assert len(codes) == len(set(codes))


def test_kafka_numbers_are_unique_where_kafka_has_one() -> None:
    numbers = [cls.kafka_code for cls in _all_error_classes() if cls.kafka_code >= 0]
    assert len(numbers) == len(set(numbers))


@pytest.mark.parametrize("cls", _all_error_classes())
def test_every_error_round_trips_through_its_wire_form(cls: type[YakError]) -> None:
    original = cls("something precise", partition=3)
    body = original.to_dict()
    rebuilt = error_for_code(body["code"], body["message"], **body["details"])
    assert type(rebuilt) is cls
    assert rebuilt.message == "something precise"
    assert rebuilt.details == {"partition": 3}
    assert 400 <= cls.http_status < 600


def test_unknown_codes_become_unknown_server_error() -> None:
    assert isinstance(error_for_code("NO_SUCH_CODE", "x"), UnknownServerError)


def test_not_leader_is_retriable_and_carries_the_leader() -> None:
    error = NotLeaderOrFollowerError("partition 0 is led by broker 2", leader=2, leader_epoch=5)
    assert error.retriable
    assert error.kafka_code == 6
    assert error.to_dict()["details"] == {"leader": 2, "leader_epoch": 5}
