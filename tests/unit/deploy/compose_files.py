"""Shared readers for the deploy tests: the compose files, nginx and Prometheus configs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
SECURE_FILE = COMPOSE_DIR / "docker-compose.secure.yml"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"

#: The Yak services of the compose topology and the port each listens on inside the network.
YAK_SERVICES = {
    "coordinator-0": 9410,
    "coordinator-1": 9410,
    "broker-0": 9420,
    "broker-1": 9420,
    "broker-2": 9420,
    "rest-proxy-0": 9430,
    "rest-proxy-1": 9430,
    "console": 9440,
}
ETCD_MEMBERS = ("etcd-0", "etcd-1", "etcd-2")
#: The schema registry and its port (``yak up``'s base + 60), published on the host too.
SCHEMA_REGISTRY = ("schema-registry", 9460)


def load(path: Path) -> dict[str, Any]:
    """A compose file with its anchors and merge keys resolved (PyYAML's safe loader)."""
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


def services(path: Path = COMPOSE_FILE) -> dict[str, dict[str, Any]]:
    found = load(path)["services"]
    assert isinstance(found, dict)
    return found


def upstream_servers(nginx_conf: Path) -> list[str]:
    """``host:port`` of every ``server`` line inside the ``upstream rest_proxies`` block."""
    text = nginx_conf.read_text()
    block = re.search(r"upstream\s+rest_proxies\s*\{(.*?)\}", text, re.S)
    assert block is not None, f"{nginx_conf}: no upstream rest_proxies block"
    return re.findall(r"^\s*server\s+([\w.-]+:\d+)", block.group(1), re.M)


def scrape_targets(prometheus_yml: Path) -> dict[str, list[str]]:
    """Every scrape job's static targets."""
    config = load(prometheus_yml)
    return {
        job["job_name"]: [t for static in job["static_configs"] for t in static["targets"]]
        for job in config["scrape_configs"]
    }
