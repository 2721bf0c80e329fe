import pytest

from yak.errors import InvalidRequestError
from yak_rest_proxy.api.v3.config_routes import config_changes
from yak_rest_proxy.api.v3.models import AlterConfigBatch, AlterConfigEntry


def batch(*entries: AlterConfigEntry) -> AlterConfigBatch:
    return AlterConfigBatch(data=list(entries))


def test_set_and_delete() -> None:
    changes = config_changes(
        batch(
            AlterConfigEntry(name="cleanup.policy", operation="DELETE"),
            AlterConfigEntry(name="compression.type", value="gzip"),
            AlterConfigEntry(name="retention.ms", value="1000", operation="set"),
        )
    )
    assert changes == ({"compression.type": "gzip", "retention.ms": "1000"}, ["cleanup.policy"])


def test_the_last_entry_for_a_name_wins() -> None:
    changes = config_changes(
        batch(
            AlterConfigEntry(name="retention.ms", value="1000"),
            AlterConfigEntry(name="retention.ms", operation="DELETE"),
            AlterConfigEntry(name="cleanup.policy", operation="DELETE"),
            AlterConfigEntry(name="cleanup.policy", value="compact"),
        )
    )
    assert changes == ({"cleanup.policy": "compact"}, ["retention.ms"])


def test_a_set_needs_a_value() -> None:
    with pytest.raises(InvalidRequestError, match=r"data\[1\]: SET needs a value"):
        config_changes(batch(AlterConfigEntry(name="a", value="1"), AlterConfigEntry(name="b")))
