"""PNG plots of a comparison: per workload, throughput and end-to-end p99 per 10 s window.

One figure per workload with two panels side by side — publish (solid) and consume (dashed)
msg/s, and end-to-end p99 in ms on a log scale — one colour per system. Matplotlib's Agg
backend (no display), small figures at 80 dpi so each file stays a few tens of KB.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from loadtest.peers.result import RunResult

__all__ = ["plot_workloads"]

_COLOURS = {
    "yak-rest": "#1f77b4",
    "yak-rest-rf1": "#9467bd",
    "yak-sdk": "#17becf",
    "yak-kafka": "#ff7f0e",
    "redis": "#d62728",
    "nats": "#2ca02c",
}


def plot_workloads(results: Sequence[RunResult], folder: Path) -> dict[str, Path]:
    """One PNG per workload in ``folder``; their paths by workload name."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for workload in dict.fromkeys(r.workload for r in results):
        runs = [r for r in results if r.workload == workload]
        figure, (rates, latency) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
        for run in runs:
            colour = _COLOURS.get(run.driver)
            x = [w.start_s + 5 for w in run.windows]
            rates.plot(
                x,
                [w.publish_rate for w in run.windows],
                "-o",
                ms=3,
                color=colour,
                label=f"{run.driver} publish",
            )
            rates.plot(
                x,
                [w.consume_rate for w in run.windows],
                "--",
                color=colour,
                label=f"{run.driver} consume",
            )
            p99 = [w.e2e_latency.p99 for w in run.windows]
            latency.plot(
                x,
                [v if v > 0 else float("nan") for v in p99],
                "-o",
                ms=3,
                color=colour,
                label=run.driver,
            )
        rates.set(title="throughput (msg/s)", xlabel="s")
        latency.set(title="end-to-end p99 (ms)", xlabel="s", yscale="log")
        rates.legend(fontsize=6, ncol=2)
        latency.legend(fontsize=6)
        rates.grid(alpha=0.3)
        latency.grid(alpha=0.3)
        figure.suptitle(workload, fontsize=9)
        figure.tight_layout()
        path = folder / f"{workload}.png"
        figure.savefig(path)
        plt.close(figure)
        out[workload] = path
    return out
