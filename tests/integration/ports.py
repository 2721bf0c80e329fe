"""A free block of ports for ``yak up --base-port`` (its layout is fixed offsets from the base)."""

from __future__ import annotations

import random
import socket


def layout_offsets(brokers: int, coordinators: int = 2, proxies: int = 1) -> tuple[int, ...]:
    """Offsets ``yak up`` binds: etcd client/peer, coordinators, brokers, proxies, console,
    the brokers' Kafka listeners."""
    return (
        0,
        1,
        *(10 + i for i in range(coordinators)),
        *(20 + i for i in range(brokers)),
        *(30 + i for i in range(proxies)),
        40,
        *(50 + i for i in range(brokers)),
    )


def free_base_port(offsets: tuple[int, ...]) -> int:
    """A base port B such that every B + offset can be bound right now."""
    for _ in range(50):
        base = random.randrange(20_000, 60_000, 100)
        sockets: list[socket.socket] = []
        try:
            for offset in offsets:
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return base
    raise RuntimeError("no free port block found")
