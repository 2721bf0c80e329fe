"""Console settings from the environment, the page filters, and the vendored assets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yak_console.pages.common import format_bytes, format_number, format_rate, format_timestamp
from yak_console.settings import ConsoleSettings
from yak_console.timestamps import format_ago
from yak_console.vendor import VENDOR_DIR, load_manifest, verify_files


def test_settings_from_env_and_overrides() -> None:
    settings = ConsoleSettings.from_env(
        {
            "YAK_API_URL": "http://proxy:8082/",
            "YAK_CONSOLE_READ_ONLY": "yes",
            "YAK_CONSOLE_EXPORT": "off",
            "YAK_CONSOLE_SAMPLE_INTERVAL_MS": "500",
        },
        port=9000,
    )
    assert settings.api_url == "http://proxy:8082"
    assert (settings.read_only, settings.allow_export) == (True, False)
    assert (settings.sample_interval_ms, settings.port) == (500, 9000)
    assert ConsoleSettings.from_env({}) == ConsoleSettings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"YAK_CONSOLE_READ_ONLY": "maybe"}, "must be true or false"),
        ({"YAK_API_URL": "proxy:8082"}, "http(s) URL"),
        ({"YAK_CONSOLE_SAMPLE_INTERVAL_MS": "10"}, "at least 100"),
    ],
)
def test_bad_settings_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ConsoleSettings.from_env(env)


def test_filters() -> None:
    assert [format_bytes(v) for v in (None, 0, 1536, 5 * 1024**3)] == [
        "-",
        "0 B",
        "1.5 KiB",
        "5.0 GiB",
    ]
    assert (format_number(1234567), format_number(None)) == ("1,234,567", "-")
    assert [format_rate(v) for v in (0.0, 12.25, 3400.0)] == ["0/s", "12.2/s", "3.4k/s"]
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert format_timestamp(-1) == "-"
    now = 1_700_000_000_000
    assert [format_ago(now - ms, now) for ms in (0, 999, 12_000, 180_000, 5 * 3_600_000)] == [
        "just now",
        "just now",
        "12 s ago",
        "3 min ago",
        "5 h ago",
    ]
    assert (format_ago(now - 2 * 86_400_000, now), format_ago(now + 5_000, now)) == (
        "2 d ago",
        "just now",
    )
    assert (format_ago(None, now), format_ago(-1, now)) == ("-", "-")


def test_vendored_files_match_their_recorded_checksums() -> None:
    assert verify_files() == []
    names = {(p.name, p.version) for p in load_manifest()}
    assert names == {("htmx.org", "2.0.11"), ("uplot", "1.6.32")}


def test_a_changed_vendored_file_is_caught(tmp_path: Path) -> None:
    for path in VENDOR_DIR.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "htmx.min.js").write_bytes(b"alert('tampered')")
    (tmp_path / "uPlot.min.css").unlink()
    problems = verify_files(tmp_path)
    assert problems == [
        "htmx.min.js differs from htmx.org@2.0.11",
        "uPlot.min.css (uplot@1.6.32) is missing",
    ]
    manifest = json.loads((tmp_path / "vendor.json").read_text())
    assert manifest["packages"][0]["integrity"].startswith("sha512-")
