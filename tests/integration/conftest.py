"""Hooks for the integration tests: a failed test's report carries what its clusters' services
logged at WARNING or above (``tests.cluster_logs``), since CI keeps pytest's output only.

Here rather than in ``tests/conftest.py``: that one is copied alone into a temporary folder by
``test_embedded_etcd`` (the etcd fixture's own tests), where ``loadtest`` does not import.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from loadtest.local_cluster import LocalCluster
from tests.cluster_logs import cluster_log_report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries what its clusters' services logged at WARNING or above
    (``tests.cluster_logs``): CI keeps pytest's output only."""
    report: pytest.TestReport = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        clusters = [value for value in funcargs.values() if isinstance(value, LocalCluster)]
        text = cluster_log_report(clusters)
        if text:
            report.sections.append(("cluster logs (WARNING and above)", text))
    return report
