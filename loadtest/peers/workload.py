"""Workloads of the peers comparison, as YAML files shaped like the OpenMessaging Benchmark's.

A workload says what load to offer, never which system receives it; every driver runs the same
file. Keys (all but ``name`` optional, defaults in ``Workload``)::

    name: 1-topic-16-partitions-1kb
    topics: 1
    partitions_per_topic: 16        # Yak only: Redis and NATS keep one stream per topic
    message_size: 1024              # bytes of every payload (a JSON document, padded)
    key_distributor: NO_KEY         # NO_KEY | KEY_ROUND_ROBIN | RANDOM_NANO (as OMB)
    producers_per_topic: 1
    subscriptions_per_topic: 1      # consumer groups reading every record
    consumers_per_subscription: 1
    producer_rate: 0                # msg/s over all producers; 0 = find the maximum sustainable
    duration_s: 30                  # the measured phase
    warmup_s: 10                    # load before the measured phase, not recorded
    backlog_records: 0              # > 0: produce this many first, then drain them

``load_workload`` raises ``WorkloadError`` naming the file and the offending key for anything
else: unknown keys, wrong types, out-of-range numbers. ``scaled`` shrinks a workload for quick
runs (durations and backlog times a factor, with floors so a run still measures something).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

__all__ = ["KeyDistributor", "Workload", "WorkloadError", "load_workload", "parse_workload"]

#: Where the bundled workloads live.
WORKLOADS_DIR = Path(__file__).resolve().parents[1] / "workloads"
MIN_MESSAGE_SIZE = 48  # the timestamp envelope of a payload needs this many bytes


class WorkloadError(ValueError):
    """A workload file that cannot be run as written."""


class KeyDistributor(StrEnum):
    NO_KEY = "NO_KEY"
    KEY_ROUND_ROBIN = "KEY_ROUND_ROBIN"
    RANDOM_NANO = "RANDOM_NANO"


@dataclass(frozen=True)
class Workload:
    """One validated workload (see the module docstring for the meaning of each field)."""

    name: str
    topics: int = 1
    partitions_per_topic: int = 1
    message_size: int = 1024
    key_distributor: KeyDistributor = KeyDistributor.NO_KEY
    producers_per_topic: int = 1
    subscriptions_per_topic: int = 1
    consumers_per_subscription: int = 1
    producer_rate: int = 0
    duration_s: float = 30.0
    warmup_s: float = 10.0
    backlog_records: int = 0

    @property
    def max_rate(self) -> bool:
        """True when the rate is to be found (``producer_rate`` 0) rather than offered."""
        return self.producer_rate == 0 and not self.backlog_records

    def scaled(self, factor: float) -> Workload:
        """Durations and backlog times ``factor`` (at least 3 s, 1 s and 1,000 records)."""
        if factor == 1:
            return self
        return dataclasses.replace(
            self,
            duration_s=max(3.0, self.duration_s * factor),
            warmup_s=max(1.0, self.warmup_s * factor),
            backlog_records=(
                max(1_000, round(self.backlog_records * factor)) if self.backlog_records else 0
            ),
        )


_INTS = {
    "topics": 1,
    "partitions_per_topic": 1,
    "message_size": MIN_MESSAGE_SIZE,
    "producers_per_topic": 1,
    "subscriptions_per_topic": 1,
    "consumers_per_subscription": 1,
    "producer_rate": 0,
    "backlog_records": 0,
}
_FLOATS = {"duration_s": 1.0, "warmup_s": 0.0}
_MAX_MESSAGE_SIZE = 512 * 1024


def parse_workload(data: object, source: str = "<workload>") -> Workload:
    """Validate a decoded YAML document (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise WorkloadError(f"{source}: a workload is a mapping, not {type(data).__name__}")
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(Workload)})
    if unknown:
        raise WorkloadError(f"{source}: unknown key(s) {', '.join(map(str, unknown))}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{source}: 'name' must be a non-empty string")
    values: dict[str, Any] = {"name": name}
    for key, low in _INTS.items():
        if key in data:
            values[key] = _number(data[key], int, low, f"{source}: {key!r}")
    for key, least in _FLOATS.items():
        if key in data:
            values[key] = float(_number(data[key], float, least, f"{source}: {key!r}"))
    if "key_distributor" in data:
        try:
            values["key_distributor"] = KeyDistributor(data["key_distributor"])
        except ValueError:
            choices = ", ".join(k.value for k in KeyDistributor)
            raise WorkloadError(
                f"{source}: 'key_distributor' must be one of {choices}, "
                f"not {data['key_distributor']!r}"
            ) from None
    workload = Workload(**values)
    if workload.message_size > _MAX_MESSAGE_SIZE:
        raise WorkloadError(f"{source}: 'message_size' is over {_MAX_MESSAGE_SIZE:,} bytes")
    if workload.backlog_records and workload.producer_rate:
        raise WorkloadError(f"{source}: a backlog is produced as fast as possible: no rate")
    return workload


def _number(value: object, kind: type[int] | type[float], low: float, where: str) -> int | float:
    # bool is an int to Python but never a count here.
    allowed = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise WorkloadError(f"{where} must be {'an integer' if kind is int else 'a number'}")
    if value < low:
        raise WorkloadError(f"{where} must be at least {low:g}, not {value}")
    return value


def load_workload(path: Path) -> Workload:
    """Read and validate one YAML workload file."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{path}: not valid YAML: {exc}") from None
    return parse_workload(data, str(path))


def bundled_workloads() -> dict[str, Workload]:
    """Every workload in ``loadtest/workloads``, by name, in file-name order."""
    loaded = (load_workload(p) for p in sorted(WORKLOADS_DIR.glob("*.yaml")))
    return {w.name: w for w in loaded}
