import pytest

from yak.errors import InvalidGroupIdError, InvalidTopicError
from yak.names import validate_group_id, validate_topic_name


@pytest.mark.parametrize("name", ["a", "orders", "orders.v2", "my_topic-1", "A" * 249, "..."])
def test_legal_topic_names_pass(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        (".", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("a" * 250, "maximum is 249"),
        ("a/b", "'/'"),
        ("../etc", "'/'"),
        ("spaces here", "' '"),
        ("tópic", "'ó'"),
        ("nul\x00", "'\\x00'"),
    ],
)
def test_illegal_topic_names_are_rejected_with_the_reason(name: str, fragment: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert fragment in info.value.message
    assert info.value.code == "INVALID_TOPIC_EXCEPTION"


def test_group_ids_follow_the_same_rule_with_their_own_error() -> None:
    assert validate_group_id("billing.workers") == "billing.workers"
    with pytest.raises(InvalidGroupIdError) as info:
        validate_group_id("a:b")
    assert info.value.code == "INVALID_GROUP_ID"


def test_topic_ids_read_in_both_text_forms() -> None:
    import base64
    import uuid

    from yak.types import topic_uuid

    made = uuid.uuid4()
    kafka_form = base64.urlsafe_b64encode(made.bytes).rstrip(b"=").decode()
    assert topic_uuid(kafka_form) == made
    assert topic_uuid(made.hex) == made
    assert topic_uuid("not-an-id") is None
    assert topic_uuid("!" * 22) is None
