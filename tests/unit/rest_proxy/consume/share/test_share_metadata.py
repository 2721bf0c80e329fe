"""Topic ids as the share messages carry them: both text forms of ``TopicRecord.topic_id``."""

from __future__ import annotations

import base64
import uuid

from yak_rest_proxy.consume.share.share_metadata import topic_uuid


def test_topic_ids_read_in_both_text_forms() -> None:
    made = uuid.uuid4()
    kafka_form = base64.urlsafe_b64encode(made.bytes).decode().rstrip("=")
    assert topic_uuid(kafka_form) == made
    assert topic_uuid(made.hex) == made
    assert topic_uuid("not-an-id") is None
