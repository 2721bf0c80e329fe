"""PNG plots of a soak run (``loadtest.soak``): memory and file descriptors per process,
latency and throughput per window, each with the faults marked.

Matplotlib's Agg backend (no display), small figures at 80 dpi. A restarted process's
incarnations are drawn as one line per process name, so a restart shows as a drop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

__all__ = ["plot_soak"]


def _minutes(seconds: float) -> float:
    return seconds / 60


#: One colour per fault kind, so a plot tells which fault a step follows.
_COLOURS = {
    "kill-broker": "#d62728",
    "sigterm-broker": "#ff7f0e",
    "pause-broker": "#9467bd",
    "kill-proxy": "#8c564b",
    "kill-coordinator": "#e377c2",
    "kill-etcd": "#2ca02c",
    "slow-disk": "#7f7f7f",
}


def _faults(axes: Axes, document: dict[str, Any]) -> None:
    """A dashed vertical line per fault, labelled once per kind."""
    labelled: set[str] = set()
    for fault in document["faults"]:
        kind = fault["fault"]
        axes.axvline(
            _minutes(fault["t_s"]),
            color=_COLOURS.get(kind, "#17becf"),
            alpha=0.5,
            lw=1,
            ls="--",
            label=None if kind in labelled else kind,
        )
        labelled.add(kind)


def _per_process(document: dict[str, Any], key: str, ylabel: str, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(8, 3.6), dpi=80)
    names = sorted({s["name"] for s in document["samples"]})
    colours = plt.get_cmap("tab20")
    axes.set_prop_cycle(color=[colours(i) for i in range(20)])  # 11+ processes: one colour each
    for name in names:
        points = [s for s in document["samples"] if s["name"] == name]
        axes.plot(
            [_minutes(p["t_s"]) for p in points], [p[key] for p in points], ".-", ms=2, label=name
        )
    _faults(axes, document)
    axes.set_xlabel("minutes")
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2, loc="upper left")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def _windows(document: dict[str, Any], folder: Path) -> list[Path]:
    windows = document["windows"]
    x = [_minutes(w["end_s"]) for w in windows]
    figure, axes = plt.subplots(figsize=(8, 3.6), dpi=80)
    for key, style in (
        ("produce_p50_ms", "-"),
        ("produce_p99_ms", "-"),
        ("e2e_p50_ms", "--"),
        ("e2e_p99_ms", "--"),
    ):
        axes.plot(x, [w[key] for w in windows], style, lw=1, label=key.replace("_ms", ""))
    _faults(axes, document)
    axes.set_yscale("log")
    axes.set_xlabel("minutes")
    axes.set_ylabel("ms (log)")
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    latency = folder / "soak-latency.png"
    figure.savefig(latency)
    plt.close(figure)

    figure, axes = plt.subplots(figsize=(8, 3.6), dpi=80)
    axes.plot(x, [w["acked_per_s"] for w in windows], "-", lw=1, label="acknowledged/s")
    axes.plot(x, [w["consumed_per_s"] for w in windows], "--", lw=1, label="consumed/s")
    _faults(axes, document)
    axes.set_xlabel("minutes")
    axes.set_ylabel("records/s")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    throughput = folder / "soak-throughput.png"
    figure.savefig(throughput)
    plt.close(figure)
    return [latency, throughput]


def _etcd(document: dict[str, Any], path: Path) -> Path:
    """Each etcd member's Go heap in use and backend file size (its own metrics): what its
    resident memory is made of."""
    figure, axes = plt.subplots(figsize=(8, 3.6), dpi=80)
    samples = document.get("etcd_samples", [])
    for member in sorted({s["member"] for s in samples}):
        points = [s for s in samples if s["member"] == member]
        x = [_minutes(p["t_s"]) for p in points]
        axes.plot(x, [p.get("heap_mb") for p in points], "-", lw=1, label=f"{member} heap")
        axes.plot(x, [p.get("db_total_mb") for p in points], ":", lw=1, label=f"{member} db")
    _faults(axes, document)
    axes.set_xlabel("minutes")
    axes.set_ylabel("MB")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2, loc="upper left")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def plot_soak(document: dict[str, Any], folder: Path) -> list[Path]:
    """``soak-rss.png``, ``soak-fds.png``, ``soak-latency.png``, ``soak-throughput.png``,
    ``soak-etcd.png``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        _per_process(document, "rss_mb", "resident MB", folder / "soak-rss.png"),
        _per_process(document, "fds", "open fds", folder / "soak-fds.png"),
        *_windows(document, folder),
        _etcd(document, folder / "soak-etcd.png"),
    ]
