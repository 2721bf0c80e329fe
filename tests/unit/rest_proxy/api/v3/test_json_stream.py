import orjson
import pytest

from yak_rest_proxy.api.v3.json_stream import (
    JsonSplitter,
    NotConcatenatedJsonError,
    ObjectTooLargeError,
)

BODY = (
    b'{"a": "x}{\\"]"}  \n{"b":[1,{"c":"\\\\"}], "d": "\xc3\xa9"}{}\r\n\t{"e": {"f": [[], {}]}}\n'
)
OBJECTS = [
    b'{"a": "x}{\\"]"}',
    b'{"b":[1,{"c":"\\\\"}], "d": "\xc3\xa9"}',
    b"{}",
    b'{"e": {"f": [[], {}]}}',
]


def split(chunks: list[bytes], limit: int = 1000) -> list[bytes]:
    splitter = JsonSplitter(limit)
    found = [obj for chunk in chunks for obj in splitter.feed(chunk)]
    splitter.finish()
    return found


def test_whole_body() -> None:
    assert split([BODY]) == OBJECTS
    assert all(isinstance(orjson.loads(o), dict) for o in OBJECTS)


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_any_chunking_gives_the_same_objects(size: int) -> None:
    chunks = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    assert split(chunks) == OBJECTS


def test_every_single_cut() -> None:
    for cut in range(len(BODY) + 1):
        assert split([BODY[:cut], BODY[cut:]]) == OBJECTS, cut


def test_counts_objects_and_keeps_only_the_one_in_progress() -> None:
    splitter = JsonSplitter(1000)
    assert splitter.feed(b'{"a": 1} {"b": ') == [b'{"a": 1}']
    assert splitter.objects == 1
    assert splitter.feed(b"2}") == [b'{"b": 2}']
    assert splitter.objects == 2


def test_empty_and_whitespace_only() -> None:
    assert split([]) == []
    assert split([b" \n\t", b"\r\n"]) == []


@pytest.mark.parametrize("garbage", [b"[1]", b"42", b'"s"', b"null", b"}"])
def test_not_an_object_between_objects(garbage: bytes) -> None:
    splitter = JsonSplitter(1000)
    # the objects before the fault are handed out; the fault is raised next
    assert splitter.feed(b'{"a": 1}\n' + garbage + b'{"b": 2}') == [b'{"a": 1}']
    with pytest.raises(NotConcatenatedJsonError, match="record 1"):
        splitter.feed(b"")
    with pytest.raises(NotConcatenatedJsonError):
        splitter.finish()


def test_unterminated_object() -> None:
    splitter = JsonSplitter(1000)
    assert splitter.feed(b'{"a": 1} {"b": "}') == [b'{"a": 1}']
    with pytest.raises(NotConcatenatedJsonError, match="ended inside"):
        splitter.finish()


def test_an_object_over_the_limit() -> None:
    splitter = JsonSplitter(20)
    assert splitter.feed(b'{"a": "' + b"x" * 10 + b'"}') == [b'{"a": "xxxxxxxxxx"}']
    with pytest.raises(ObjectTooLargeError):
        splitter.feed(b'{"a": "' + b"x" * 30)


def test_many_small_objects_do_not_grow_the_buffer() -> None:
    splitter = JsonSplitter(64)
    for _ in range(10_000):  # 10,000 x 14 bytes through a 64-byte limit
        assert splitter.feed(b'{"k": "v"}\n   ') == [b'{"k": "v"}']
    splitter.finish()
