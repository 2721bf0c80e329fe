"""``loadtest.bench_sendfile``, tiny: both ways send every byte the reader counts, and the
document holds each size's rounds and medians."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest import bench_sendfile


def test_each_way_delivers_every_byte_and_costs_cpu(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    for mode in bench_sendfile.MODES:
        measured = bench_sendfile.measure(mode, 5000, 300_000, path)  # the reader's count checked
        assert measured["cpu_us_per_kib"] > 0
        assert 0 <= measured["system_us_per_kib"] <= measured["cpu_us_per_kib"]
        assert measured["mb_per_s"] > 0


def test_a_short_count_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 65536)
    real_send = bench_sendfile._send
    monkeypatch.setattr(
        bench_sendfile, "_send", lambda *args: real_send(*args) + 1
    )  # claims a byte more than it sent
    with pytest.raises(RuntimeError, match="the reader received"):
        bench_sendfile.measure("pread", 1024, 10_240, path)


def test_main_writes_every_size_with_both_medians(tmp_path: Path) -> None:
    out = tmp_path / "sendfile.json"
    bench_sendfile.main(
        [
            "--sizes",
            "1024,8192",
            "--rounds",
            "2",
            "--mib",
            "1",
            "--file-mib",
            "1",
            "--out",
            str(out),
        ]
    )
    document = json.loads(out.read_text())
    assert set(document["sizes"]) == {"1024", "8192"}
    for row in document["sizes"].values():
        assert [len(row["rounds"][mode]) for mode in bench_sendfile.MODES] == [2, 2]
        assert row["pread_cpu_us_per_kib"] > 0
        assert row["sendfile_cpu_us_per_kib"] > 0
        ratio = row["sendfile_cpu_us_per_kib"] / row["pread_cpu_us_per_kib"]
        assert row["sendfile_over_pread"] == pytest.approx(ratio, abs=0.001)
    assert document["command"].startswith("python -m loadtest.bench_sendfile --sizes 1024,8192")


def test_a_size_larger_than_the_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        bench_sendfile.main(["--sizes", str(2 << 20), "--file-mib", "1", "--out", str(tmp_path)])
