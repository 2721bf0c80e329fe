"""The JSON log formatter and ``YAK_LOG_FORMAT`` / ``YAK_ACCESS_LOG``."""

from __future__ import annotations

import logging
import sys

import orjson
import pytest

from yak.observability.logs import JsonFormatter, access_log_enabled, log_format
from yak.observability.request_id import begin_request, end_request


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "yak_broker.server.broker", logging.WARNING, "f.py", 1, message, args, None
    )
    record.__dict__.update(extra)
    return record


def test_a_line_is_one_json_object_with_the_standard_fields() -> None:
    line = JsonFormatter("broker").format(_record("broker %d stopped", 3))
    assert "\n" not in line
    out = orjson.loads(line)
    assert out["message"] == "broker 3 stopped"
    assert out["level"] == "WARNING"
    assert out["logger"] == "yak_broker.server.broker"
    assert out["service"] == "broker"
    assert out["ts"].endswith("+00:00")
    assert "request_id" not in out


def test_the_current_request_id_and_extra_fields_are_included() -> None:
    scope, token = begin_request("rid-1")
    try:
        line = JsonFormatter("rest-proxy").format(_record("x", status=201, route="/topics/{t}"))
    finally:
        end_request(scope, token)
    out = orjson.loads(line)
    assert out["request_id"] == "rid-1"
    assert out["status"] == 201
    assert out["route"] == "/topics/{t}"


def test_exceptions_carry_their_traceback_and_odd_values_become_text() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "f.py", 1, "failed", None, sys.exc_info())
    record.__dict__["payload"] = object()
    out = orjson.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in out["exc"]
    assert out["payload"].startswith("<object")
    assert "service" not in out


def test_the_format_comes_from_the_environment() -> None:
    assert log_format({}) == "text"
    assert log_format({"YAK_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(ValueError, match="text or json"):
        log_format({"YAK_LOG_FORMAT": "xml"})
    assert not access_log_enabled({})
    assert access_log_enabled({"YAK_ACCESS_LOG": "true"})
    assert not access_log_enabled({"YAK_ACCESS_LOG": "0"})
