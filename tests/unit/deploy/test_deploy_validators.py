"""The deploy files pass their linters: compose (Debian's ``docker-compose config``, which
needs no Docker engine, and the compose-spec JSON schema vendored in ``check-jsonschema``) and
the Dockerfile (``hadolint``). ``make test`` installs all three (``make deploy-tools``; the
last two come with the ``dev`` extra)."""

from __future__ import annotations

import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.unit.deploy.compose_files import COMPOSE_DIR, COMPOSE_FILE, DOCKERFILE, SECURE_FILE

HEALTHCHECK = DOCKERFILE.parent / "healthcheck.py"
OFFLINE = DOCKERFILE.parents[1] / "offline"


def _tool(name: str) -> str:
    """A linter next to this interpreter (a dev extra) or on PATH (a Debian package)."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run `make deploy-tools` (or `make install`)")
    return found


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    "files",
    [
        [COMPOSE_FILE],
        [COMPOSE_FILE, SECURE_FILE],
    ],
    ids=["plain", "secure"],
)
@pytest.mark.parametrize("profiles", [[], ["monitoring", "spark"]], ids=["core", "profiles"])
def test_docker_compose_accepts_the_files(files: list[Path], profiles: list[str]) -> None:
    argv = [_tool("docker-compose")]
    for path in files:
        argv += ["-f", str(path)]
    for profile in profiles:
        argv += ["--profile", profile]
    done = _run([*argv, "config", "--quiet"], COMPOSE_DIR)
    assert done.returncode == 0, done.stderr + done.stdout


def test_docker_compose_refuses_a_broken_file(tmp_path: Path) -> None:
    """The check is real: an unknown key fails it."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  broker:\n    image: yak\n    replicaz: 3\n")
    done = _run([_tool("docker-compose"), "-f", str(broken), "config", "--quiet"], tmp_path)
    assert done.returncode != 0


def test_compose_files_match_the_compose_spec_schema() -> None:
    done = _run(
        [
            _tool("check-jsonschema"),
            *("--builtin-schema", "vendor.compose-spec"),
            str(COMPOSE_FILE),
            str(SECURE_FILE),
        ],
        COMPOSE_DIR,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    done = _run([_tool("hadolint"), "--no-color", str(DOCKERFILE)], DOCKERFILE.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def _stage(name: str) -> list[str]:
    """The instructions of one build stage, continuation lines joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    start = next(i for i, line in enumerate(lines) if line.endswith(f" AS {name}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("FROM ")), None)
    return lines[start:end]


def test_the_image_builds_in_two_stages_from_the_wheelhouse() -> None:
    """BASE_IMAGE is python:3.11-slim unless told otherwise (the local Debian base where no
    registry is reachable); Yak comes from the wheelhouse only (no index, so no network)."""
    text = DOCKERFILE.read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim" in text
    assert "# syntax=" not in text, "BuildKit would fetch that frontend from a registry"
    builder = _stage("builder")
    assert builder[0] == "FROM ${BASE_IMAGE} AS builder"
    (install,) = [line for line in builder if " install --no-index" in line]
    assert "--no-index --find-links /wheels" in install
    assert "COPY wheels/ /wheels/" in builder
    runtime = _stage("runtime")
    assert runtime[0] == "FROM ${BASE_IMAGE} AS runtime"
    assert any(line.startswith("COPY --from=builder /opt/yak") for line in runtime)
    assert not any("pip install" in line for line in runtime), "the runtime stage builds nothing"


@pytest.mark.parametrize("name", ["etcd", "nginx", "prometheus"])
def test_hadolint_finds_nothing_in_the_offline_dockerfiles(name: str) -> None:
    dockerfile = OFFLINE / f"{name}.Dockerfile"
    done = _run([_tool("hadolint"), "--no-color", str(dockerfile)], OFFLINE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_offline_scripts_parse() -> None:
    for script in sorted(OFFLINE.glob("*.sh")):
        done = _run(["sh", "-n", str(script)], OFFLINE)
        assert done.returncode == 0, f"{script.name}: {done.stderr}"


def test_compose_accepts_the_offline_images() -> None:
    """deploy/offline/offline.env names only variables the compose files read, and compose
    takes the files with them (what `make compose-up` exports)."""
    names = dict(line.split("=", 1) for line in _offline_env())
    used = COMPOSE_FILE.read_text() + SECURE_FILE.read_text()
    assert {n for n in names if "${" + n + ":-" not in used} == set()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    done = subprocess.run(
        [_tool("docker-compose"), "-f", str(COMPOSE_FILE), "config"],
        cwd=COMPOSE_DIR,
        env={**env, **names},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for image in names.values():
        if ":" in image and not image.startswith("yak-debian"):
            assert f"image: {image}" in done.stdout, image
    assert f"BASE_IMAGE: {names['YAK_BASE_IMAGE']}" in done.stdout


def _offline_env() -> list[str]:
    lines = (OFFLINE / "offline.env").read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def test_the_runtime_runs_as_a_non_root_user() -> None:
    users = [line.split()[1] for line in _stage("runtime") if line.startswith("USER ")]
    assert users
    assert users[-1].split(":")[0] not in ("root", "0")


def test_the_runtime_checks_health_on_healthz_and_binds_every_interface() -> None:
    runtime = _stage("runtime")
    (check,) = [line for line in runtime if line.startswith("HEALTHCHECK ")]
    assert "yak-healthcheck" in check
    assert "/healthz" in (DOCKERFILE.parent / "healthcheck.py").read_text()
    assert any("YAK_HOST=0.0.0.0" in line for line in runtime if line.startswith("ENV "))
    assert 'ENTRYPOINT ["yak-entrypoint"]' in runtime


def test_the_entry_point_starts_every_service() -> None:
    script = (DOCKERFILE.parent / "entrypoint.sh").read_text()
    for service, port in (
        ("coordinator", 9410),
        ("broker", 9420),
        ("rest-proxy", 9430),
        ("console", 9440),
    ):
        assert f'exec yak-{service} --port "${{YAK_PORT:-{port}}}"' in script, service


def test_the_entry_point_dispatches_on_its_first_argument(tmp_path: Path) -> None:
    for script in ("yak-coordinator", "yak-broker", "yak-rest-proxy", "yak-console", "yak"):
        fake = tmp_path / script
        fake.write_text(f'#!/bin/sh\necho {script} "$@" "key=${{YAK_CONSOLE_API_KEY:-}}"\n')
        fake.chmod(0o755)
    (tmp_path / "key").write_text("yak_k_s")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "YAK_PORT": "19999"}

    def run(*argv: str, **extra: str) -> str:
        done = subprocess.run(
            ["sh", str(DOCKERFILE.parent / "entrypoint.sh"), *argv],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout.strip()

    assert run("broker", "--rack", "a") == "yak-broker --port 19999 --rack a key="
    assert run("rest-proxy") == "yak-rest-proxy --port 19999 key="
    assert run("yak", "topics", "list") == "yak topics list key="
    console = run("console", YAK_CONSOLE_API_KEY_FILE=str(tmp_path / "key"))
    assert console == "yak-console --port 19999 key=yak_k_s"


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def test_the_health_check_gets_healthz_on_the_port_of_pid_1(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("healthcheck", HEALTHCHECK)
    assert spec is not None
    assert spec.loader is not None
    healthcheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(healthcheck)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        cmdline = tmp_path / "cmdline"
        cmdline.write_bytes(b"/opt/yak/bin/yak-broker\0--port\0%d\0" % port)
        assert healthcheck.main(cmdline, {}) == 0
        assert healthcheck.main(tmp_path / "missing", {"YAK_PORT": str(port)}) == 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert healthcheck.main(cmdline, {}) == 1  # nothing listens any more
