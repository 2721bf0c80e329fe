"""A Docker engine and a compose project for the compose test (issue 22).

``docker_engine()`` uses the engine the environment points at (``DOCKER_HOST`` or the default
socket) when one answers, and otherwise starts a private ``dockerd`` whose every path (data
root, exec root, pid file, socket) lies in a temporary folder, so it clashes with nothing on
the machine, and stops it and removes the folder afterwards. The private daemon changes no
host firewall rule (``--iptables=false``: Docker's NAT is not needed, the builds that install
Debian packages use the host's network and published ports go through docker-proxy) and
makes no ``docker0`` (``--bridge=none``): all it leaves behind while it runs is the compose
project's own bridge, which ``docker compose down`` removes.

``Compose`` runs ``docker compose`` (the v2 plugin) where it exists, else Debian's
``docker-compose`` (1.29 on Debian 12, which has no v2 package); both read the same files.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "deploy" / "compose"
OFFLINE = ROOT / "deploy" / "offline"

#: Where the private daemons' compose networks are carved from: an unusual block, so a
#: leftover ``docker0`` or another engine's networks do not overlap. Each private daemon takes
#: one /20 of it that no route of the host uses yet (two test runs at once get two).
ADDRESS_BLOCK = ipaddress.ip_network("10.213.0.0/16")


def _address_pool() -> str:
    """``--default-address-pool`` for a new private daemon: a free /20 of ADDRESS_BLOCK, in
    /24 networks, picked at random among the free ones."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False)
    used = []
    for line in routes.stdout.splitlines():
        with contextlib.suppress(ValueError):
            used.append(ipaddress.ip_network(line.split()[0], strict=False))
    free = [
        block
        for block in ADDRESS_BLOCK.subnets(new_prefix=20)
        if not any(block.overlaps(route) for route in used if route.prefixlen > 0)
    ]
    if not free:
        raise AssertionError(f"every /20 of {ADDRESS_BLOCK} is routed already: {used}")
    return f"base={random.choice(free)},size=24"


def _clean_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    env.update(extra)
    return env


def run(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path = ROOT,
    timeout: float = 300,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure the exception carries its output."""
    done = subprocess.run(
        list(argv), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-4000:]}\n"
            f"{done.stderr[-4000:]}"
        )
    return done


@dataclass
class Engine:
    """The environment that reaches a Docker engine, and whether this test started it."""

    env: dict[str, str]
    owned: bool
    folder: Path | None = None

    def docker(self, *argv: str, timeout: float = 120, check: bool = True) -> str:
        return run(["docker", *argv], self.env, timeout=timeout, check=check).stdout


def _answers(env: Mapping[str, str]) -> bool:
    try:
        done = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            env=dict(env),
            capture_output=True,
            timeout=20,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _forward_policy_drops() -> bool:
    """Whether the host's FORWARD chain drops by default: with ``br_netfilter`` that also
    drops traffic between containers on one bridge, unless a rule lets it through."""
    iptables = shutil.which("iptables")
    if iptables is None:
        return False
    done = subprocess.run([iptables, "-S", "FORWARD"], capture_output=True, text=True, check=False)
    return "-P FORWARD DROP" in done.stdout


@contextlib.contextmanager
def docker_engine() -> Iterator[Engine]:
    """An engine for the test: the running one, else a private ``dockerd`` (stopped after)."""
    env = _clean_env()
    if _answers(env):
        yield Engine(env, owned=False)
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise AssertionError("no Docker engine and no dockerd: run `make docker-tools`")
    folder = Path(tempfile.mkdtemp(prefix="yak-dockerd-"))
    socket = folder / "docker.sock"
    log = (folder / "dockerd.log").open("w")
    argv = [
        dockerd,
        *("--data-root", str(folder / "data")),
        *("--exec-root", str(folder / "exec")),
        *("--pidfile", str(folder / "docker.pid")),
        *("--host", f"unix://{socket}"),
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
        *("--default-address-pool", _address_pool()),
    ]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = Engine({**env, "DOCKER_HOST": f"unix://{socket}"}, owned=True, folder=folder)
    try:
        deadline = time.monotonic() + 60
        while not _answers(engine.env):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    "dockerd did not start:\n" + (folder / "dockerd.log").read_text()[-4000:]
                )
            time.sleep(0.5)  # another process's start-up: nothing to wait on but its socket
        yield engine
    finally:
        _stop(proc, folder)
        log.close()


def _stop(proc: subprocess.Popen[bytes], folder: Path) -> None:
    """Stop the private daemon (it stops its containerd), then remove its folder."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # A daemon killed mid-way can leave overlay or netns mounts under its folder.
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(str(folder))
    ]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)


def compose_command(env: Mapping[str, str]) -> list[str]:
    """``docker compose`` where the plugin exists, else ``docker-compose``."""
    plugin = subprocess.run(
        ["docker", "compose", "version"], env=dict(env), capture_output=True, check=False
    )
    if plugin.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise AssertionError("neither `docker compose` nor docker-compose: run `make docker-tools`")


def offline_images() -> dict[str, str]:
    """The image variables of deploy/offline/offline.env (what compose-images.sh builds)."""
    found = {}
    for line in (OFFLINE / "offline.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split("=", 1)
            found[key.strip()] = value.strip()
    return found


@dataclass
class Compose:
    """One compose project (a unique name per run) over the given files."""

    engine: Engine
    project: str
    files: list[Path]
    variables: dict[str, str]
    profiles: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._command = compose_command(self.engine.env)

    @property
    def env(self) -> dict[str, str]:
        return {**self.engine.env, **self.variables}

    def __call__(self, *argv: str, timeout: float = 300, check: bool = True) -> str:
        command = [*self._command, "--project-name", self.project]
        for path in self.files:
            command += ["--file", str(path)]
        for profile in self.profiles:
            command += ["--profile", profile]
        done = run([*command, *argv], self.env, cwd=COMPOSE_DIR, timeout=timeout, check=check)
        return done.stdout

    def container(self, service: str) -> str:
        (container,) = self("ps", "-q", service).split()
        return container

    def labelled(self, kind: str) -> list[str]:
        """The names of the project's containers, networks or volumes on the engine."""
        label = f"label=com.docker.compose.project={self.project}"
        if kind == "container":
            argv = ["ps", "-a", "--format", "{{.Names}}"]
        else:
            argv = [kind, "ls", "--format", "{{.Name}}"]
        return sorted(self.engine.docker(*argv, "--filter", label).split())

    def health(self) -> dict[str, str]:
        """Each of the project's containers' state: its health where it has a check."""
        found = {}
        label = f"label=com.docker.compose.project={self.project}"
        for container in self.engine.docker("ps", "-aq", "--filter", label).split():
            service, state = self.engine.docker(
                "inspect",
                "--format",
                '{{index .Config.Labels "com.docker.compose.service"}} '
                "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}",
                container,
            ).split()
            found[service] = state
        return found

    def logs(self) -> str:
        return self("logs", "--no-color", "--tail", "40", check=False, timeout=60)


@contextlib.contextmanager
def bridge_forwarding(bridge: str) -> Iterator[None]:
    """Let traffic between containers on ``bridge`` through a host whose FORWARD chain drops
    by default (a host where another Docker engine ran leaves it so); the rule goes after."""
    if not _forward_policy_drops():
        yield
        return
    rule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    subprocess.run(["iptables", "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-D", *rule], check=False)
