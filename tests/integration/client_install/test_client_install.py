"""The client installs light: Yak's wheel without extras, in a fresh virtualenv (issue 31).

Builds the project's wheel, installs it into a new virtualenv with pip (the registry's wheels of
the base dependencies only), and checks there that the SDK and the CLI work while none of the
server stack is installed; then that the `server` extra brings it. This is what a user of the
SDK gets from `pip install yak`, and what the services get from `pip install 'yak[server]'`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
#: Distributions the client must not bring (the issue's list, and the server extra's others).
SERVER_STACK = ("fastapi", "uvicorn", "aetcd", "jinja2", "pydantic-settings", "starlette")
SERVER_EXTRA = ("fastapi", "uvicorn", "aetcd", "jinja2", "argon2-cffi", "cryptography")

_PROBE = """
import importlib.metadata as md, json, sys
import yak.sdk, yak.cli.main
from yak.sdk import Producer, Consumer, TopicPartition
names = {d.metadata["Name"].lower().replace("_", "-") for d in md.distributions()}
loaded = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"installed": sorted(names), "loaded": loaded}))
"""


def _run(*argv: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("wheel")
    built = _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dest, ROOT)
    assert built.returncode == 0, built.stderr
    (found,) = dest.glob("yak-*.whl")
    return found


def _venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(where)
    return where / "bin" / "python"


@pytest.mark.timeout(900)
def test_the_client_installs_without_the_server_stack(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "client")
    installed = _run(python, "-m", "pip", "install", "--quiet", wheel)
    assert installed.returncode == 0, installed.stderr

    probe = _run(python, "-c", _PROBE, timeout=120)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert {"yak", "httpx", "pydantic", "orjson"} <= set(found["installed"])
    assert not set(SERVER_STACK) & set(found["installed"]), found["installed"]
    assert not {"fastapi", "uvicorn", "aetcd", "grpc", "jinja2"} & set(found["loaded"])

    cli = _run(tmp_path / "client" / "bin" / "yak", "--help", timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "topics" in cli.stdout
    assert "consume" in cli.stdout

    up = _run(tmp_path / "client" / "bin" / "yak", "up", "--data-dir", tmp_path / "d", timeout=120)
    assert up.returncode == 2, up.stdout + up.stderr
    assert "pip install 'yak[server]'" in up.stderr
    assert not (tmp_path / "d").exists()  # refused before anything is written


@pytest.mark.timeout(900)
def test_the_server_extra_brings_the_services_stack(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "server")
    installed = _run(python, "-m", "pip", "install", "--quiet", f"{wheel}[server]")
    assert installed.returncode == 0, installed.stderr
    names = _run(python, "-m", "pip", "list", "--format=json", timeout=120)
    listed = {p["name"].lower().replace("_", "-") for p in json.loads(names.stdout)}
    assert set(SERVER_EXTRA) <= listed, listed
    imported = _run(python, "-c", "import yak_broker.main, yak_rest_proxy.main", timeout=120)
    assert imported.returncode == 0, imported.stderr
