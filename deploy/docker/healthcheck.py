"""The image's HEALTHCHECK: GET the running service's ``/healthz`` on 127.0.0.1.

The port is the ``--port`` the entry point gave the service (read from PID 1's command
line), else ``YAK_PORT``. With ``YAK_TLS_CERT`` set the service speaks TLS: the check uses
https and verifies with ``YAK_TLS_CA`` (certificates name 127.0.0.1), presenting
``YAK_TLS_CLIENT_CERT``/``_KEY`` when a listener requires client certificates. Standard
library only; exit 0 when the answer is 200, else 1.
"""

from __future__ import annotations

import itertools
import os
import ssl
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path


def service_port(cmdline: Path, env: Mapping[str, str]) -> int:
    """The ``--port`` in ``cmdline`` (PID 1: the service the entry point exec'd), else
    ``YAK_PORT``."""
    try:
        argv = cmdline.read_bytes().decode().split("\0")
    except OSError:
        argv = []
    for flag, value in itertools.pairwise(argv):
        if flag == "--port":
            return int(value)
    return int(env.get("YAK_PORT", "9420"))


def main(cmdline: Path = Path("/proc/1/cmdline"), env: Mapping[str, str] = os.environ) -> int:
    context: ssl.SSLContext | None = None
    scheme = "http"
    if env.get("YAK_TLS_CERT"):
        scheme = "https"
        context = ssl.create_default_context(cafile=env.get("YAK_TLS_CA") or None)
        if env.get("YAK_TLS_CLIENT_CERT"):
            context.load_cert_chain(env["YAK_TLS_CLIENT_CERT"], env.get("YAK_TLS_CLIENT_KEY"))
    url = f"{scheme}://127.0.0.1:{service_port(cmdline, env)}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=2.5, context=context) as answer:
            return 0 if answer.status == 200 else 1
    except OSError as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
