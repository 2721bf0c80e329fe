"""Would ``sendfile`` make follower fetches cheaper? The sender's CPU per KiB, measured.

A leader answers a follower's fetch by reading the batches from its segment file
(``LogSegment.read``: one ``pread``) and writing the answer's head and those bytes to the
socket (``transport.writelines``: one ``sendmsg``). ``sendfile`` would move the bytes from
the page cache to the socket inside the kernel and skip the copy into and out of the
process — the move docs/performance.md listed as untried for issues 32 and 34. This
benchmark measures both ways over loopback TCP to a reader in another process, which only
drains the socket and counts what arrived:

- ``pread``: ``os.pread`` of ``size`` bytes, then ``socket.sendmsg([head, bytes])``;
- ``sendfile``: ``socket.sendall(head)``, then ``os.sendfile`` of the same range (a head must
  go before the file's bytes: a fetch answer's fields precede its records).

The head is 40 bytes, a fetch answer's per-partition fields. The file is read from the page
cache (it is written first), as a follower fetch of recent appends is. For each fetch size
the two ways alternate ``--rounds`` times; the figure is the median round's CPU
(``getrusage``: user + system) of the sending process per KiB sent. Run with ``python -m
loadtest.bench_sendfile``; it writes ``loadtest/results/sendfile.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["measure", "run"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "loadtest" / "results" / "sendfile.json"
HEAD = b"h" * 40
MODES = ("pread", "sendfile")
DEFAULT_SIZES = (1024, 5 * 1024, 64 * 1024, 512 * 1024)
FILE_BYTES = 64 << 20


def _drain(listener: socket.socket, report: Connection) -> None:
    """The reader: accept one connection, read it to its end, report the bytes received."""
    connection, _ = listener.accept()
    buffer = bytearray(1 << 20)
    received = 0
    while count := connection.recv_into(buffer):
        received += count
    connection.close()
    report.send(received)


def _send(mode: str, sock: socket.socket, fd: int, size: int, total: int, file_bytes: int) -> int:
    """Send ``total`` bytes of the file in answers of ``size`` bytes; the bytes sent."""
    sent = position = 0
    while sent < total:
        if position + size > file_bytes:
            position = 0
        if mode == "pread":
            data = os.pread(fd, size, position)
            count = sock.sendmsg([HEAD, data])
            if count < len(HEAD) + len(data):  # a partial write: the rest, as a transport would
                sock.sendall((HEAD + data)[count:])
        else:
            sock.sendall(HEAD)
            offset, left = position, size
            while left:
                count = os.sendfile(sock.fileno(), fd, offset, left)
                offset += count
                left -= count
        position += size
        sent += size + len(HEAD)
    return sent


def measure(mode: str, size: int, total: int, path: Path) -> dict[str, float]:
    """One round: the sender's CPU µs per KiB, its system share, the rate; the reader's count
    checked against what was sent."""
    context = multiprocessing.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    ours, theirs = context.Pipe()
    reader = context.Process(target=_drain, args=(listener, theirs))
    reader.start()
    listener.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            sent = _send(mode, sock, fd, size, total, os.fstat(fd).st_size)
            after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
        received = ours.recv()
    finally:
        os.close(fd)
        reader.join(timeout=30)
        if reader.is_alive():
            reader.kill()
    if received != sent:
        raise RuntimeError(f"{mode}: sent {sent} bytes, the reader received {received}")
    kib = sent / 1024
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    return {
        "cpu_us_per_kib": round((user + system) / kib * 1e6, 4),
        "system_us_per_kib": round(system / kib * 1e6, 4),
        "mb_per_s": round(sent / elapsed / 1e6, 1),
    }


def run(sizes: tuple[int, ...], rounds: int, total: int, file_bytes: int) -> dict[str, Any]:
    """Every size, both modes alternating ``rounds`` times; the document ``sendfile.json``
    holds (per size: each round, each mode's median CPU per KiB, sendfile's over pread's)."""
    with tempfile.TemporaryDirectory(prefix="yak-bench-sendfile-") as folder:
        path = Path(folder) / "segment.log"
        path.write_bytes(os.urandom(file_bytes))
        with path.open("rb") as warm:  # into the page cache, as a recent append is
            while warm.read(1 << 20):
                pass
        results: dict[str, Any] = {}
        for size in sizes:
            measured: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
            for _ in range(rounds):
                for mode in MODES:
                    measured[mode].append(measure(mode, size, total, path))
            medians = {
                mode: statistics.median(r["cpu_us_per_kib"] for r in measured[mode])
                for mode in MODES
            }
            results[str(size)] = {
                "rounds": measured,
                "pread_cpu_us_per_kib": medians["pread"],
                "sendfile_cpu_us_per_kib": medians["sendfile"],
                "sendfile_over_pread": round(medians["sendfile"] / medians["pread"], 3),
            }
    return {"benchmark": "sendfile", "bytes_per_round": total, "sizes": results}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sizes",
        default=",".join(str(size) for size in DEFAULT_SIZES),
        help="fetch answer sizes in bytes, comma-separated",
    )
    parser.add_argument("--rounds", type=int, default=5, help="measurements of each mode")
    parser.add_argument("--mib", type=int, default=32, help="MiB sent a round")
    parser.add_argument("--file-mib", type=int, default=FILE_BYTES >> 20, help="the file's MiB")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON results")
    args = parser.parse_args(argv)
    sizes = tuple(int(size) for size in args.sizes.split(","))
    file_bytes = args.file_mib << 20
    if max(sizes) > file_bytes:
        parser.error("every size must fit in the file")
    result = run(sizes, args.rounds, args.mib << 20, file_bytes)
    result["command"] = "python -m loadtest.bench_sendfile " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    result["load_average"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for size, row in result["sizes"].items():
        print(
            f"{int(size):>8} B: pread {row['pread_cpu_us_per_kib']:.3f} µs/KiB, "
            f"sendfile {row['sendfile_cpu_us_per_kib']:.3f} ({row['sendfile_over_pread']:.2f}x)"
        )


if __name__ == "__main__":
    main()
