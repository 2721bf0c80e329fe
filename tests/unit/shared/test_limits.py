"""Tests for yak.limits: the soft open-files limit raised to the hard one, never fatal."""

from __future__ import annotations

import logging
import resource

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from yak.limits import raise_open_files_limit
from yak.web import serve as serve_module


class FakeLimits:
    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.limits = (soft, hard)
        self.refuse = refuse
        self.calls: list[tuple[int, tuple[int, int]]] = []

    def getrlimit(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.limits

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        self.calls.append((which, limits))
        if self.refuse:
            raise ValueError("not allowed to raise maximum limit")
        self.limits = limits


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeLimits) -> None:
    monkeypatch.setattr(resource, "getrlimit", fake.getrlimit)
    monkeypatch.setattr(resource, "setrlimit", fake.setrlimit)


def test_the_soft_limit_is_raised_to_the_hard_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLimits(1024, 524_288)
    install(monkeypatch, fake)
    with caplog.at_level(logging.INFO, logger="yak.limits"):
        assert raise_open_files_limit() == 524_288
    assert fake.calls == [(resource.RLIMIT_NOFILE, (524_288, 524_288))]
    assert "open files: soft limit raised 1024 -> 524288" in caplog.text


def test_nothing_is_set_at_the_hard_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLimits(4096, 4096)
    install(monkeypatch, fake)
    with caplog.at_level(logging.INFO, logger="yak.limits"):
        assert raise_open_files_limit() == 4096
    assert fake.calls == []
    assert "soft limit 4096 (the hard limit)" in caplog.text


def test_a_refusal_is_logged_not_raised(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLimits(1024, resource.RLIM_INFINITY, refuse=True)
    install(monkeypatch, fake)
    with caplog.at_level(logging.INFO, logger="yak.limits"):
        assert raise_open_files_limit() == 1024
    assert fake.limits == (1024, resource.RLIM_INFINITY)
    assert "soft limit stays 1024, could not raise it to unlimited" in caplog.text
    assert caplog.records[-1].levelno == logging.WARNING


def test_serve_raises_the_limit_before_it_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []

    class FakeServer:
        def __init__(self, config: object) -> None:
            pass

        def run(self, sockets: object = None) -> None:
            events.append("listen")

    monkeypatch.setattr(serve_module, "raise_open_files_limit", lambda: events.append("limit"))
    monkeypatch.setattr(uvicorn, "Server", FakeServer)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        return None

    serve_module.serve(app, host="127.0.0.1", port=0, header_timeout=1.0)
    assert events == ["limit", "listen"]
