"""``serve`` binds its port before the app's lifespan runs.

The broker opens its internal listener on "any free port" at startup; were the HTTP port bound
only after the lifespan, the kernel could hand that very port to the internal listener and
uvicorn's bind would fail (it happened in CI). The app here checks, from inside its lifespan,
whether the port is still free.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from yak.etcd_server import free_ports

SCRIPT = textwrap.dedent(
    """
    import contextlib, os, signal, socket, sys
    from yak.web.serve import serve

    port = int(sys.argv[1])
    out = sys.argv[2]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", port))
            verdict = "free"
        except OSError:
            verdict = "taken"
        finally:
            probe.close()
        with open(out, "w") as f:
            f.write(verdict)
        os.kill(os.getpid(), signal.SIGTERM)
        yield

    from starlette.applications import Starlette
    serve(Starlette(lifespan=lifespan), host="127.0.0.1", port=port, log_level="warning")
    """
)


def test_the_port_is_taken_before_the_lifespan_starts(tmp_path: Path) -> None:
    (port,) = free_ports()
    out = tmp_path / "verdict"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(port), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # uvicorn re-raises the SIGTERM it stopped on once it has shut down
    assert done.returncode in (0, -15), done.stderr
    assert out.read_text() == "taken"
