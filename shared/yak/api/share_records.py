"""Bodies of the share-group record API: acquire and acknowledge records of a share group
(``/api/v1/share-groups/{group}/acquire``, ``…/acknowledgements``, ``…/stream``, ``…/ws``).

A member acquires records under a lock (``lock_timeout_ms``, the group's lock duration) and
then acknowledges each one: ``accept`` (done), ``release`` (deliver again now, to anyone),
``reject`` (never again: to the group's dead-letter topic) or ``renew`` (keep the lock another
lock duration). Locks are the member's: an acknowledgement names the ``member_id`` the acquire
answered with. Records come in no promised order. Keys, values and headers are rendered in the
encodings of the native poll (``yak.api.records``); ``delivery_count`` says how many times the
record was handed out, this time included.

An acknowledgement entry names one offset (``offset``) or an inclusive range
(``first_offset``/``last_offset``); each entry gets its own result, ``error`` None when it was
applied. An entry that names records the member does not hold (never acquired by it, or its
lock expired) fails with ``INVALID_RECORD_STATE`` and changes nothing. An acquire may carry the
answers to what the member holds (``AcquireRequest.acknowledgements``, the same entries): they
are applied before it acquires, and its answer has their results (``acknowledgement_results``)
beside the records — one round trip instead of two, as Kafka's share consumers do it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yak.api.records import INT64_MAX, ConsumedRecord, Encoding, HeaderEncoding

__all__ = [
    "MAX_ACK_ENTRIES",
    "MAX_ACQUIRE_RECORDS",
    "AckEntry",
    "AckEntryResult",
    "AcknowledgeRequest",
    "AcknowledgeResponse",
    "AcknowledgeType",
    "AcquireMode",
    "AcquireRequest",
    "AcquireResponse",
    "AcquiredRecord",
    "PartitionError",
]

#: The most records one acquire may ask for.
MAX_ACQUIRE_RECORDS = 10_000
#: The most entries one acknowledgement request may carry.
MAX_ACK_ENTRIES = 10_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AcknowledgeType(StrEnum):
    """What a member says of records it holds (KIP-932's acknowledge types)."""

    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    RENEW = "renew"


class AcquireMode(StrEnum):
    """How an acquire bounds what it takes (Kafka's ``share.acquire.mode``, KIP-1206)."""

    #: Each partition's acquisition goes on to the end of the last record batch it answers
    #: (the answer carries that batch anyway): ``max_records`` is soft, exceeded by at most
    #: one batch per partition. Kafka's default.
    BATCH_OPTIMIZED = "batch_optimized"
    #: At most ``max_records`` records.
    RECORD_LIMIT = "record_limit"


class AcquiredRecord(ConsumedRecord):
    """A record the member now holds, and how many times it was delivered (this time too)."""

    delivery_count: int


class PartitionError(BaseModel):
    """A partition an acquire could not read this time (its records come on a later one)."""

    topic: str
    partition: int
    code: str
    message: str


class AckEntry(_Body):
    """One offset (``offset``) or an inclusive range (``first_offset``, ``last_offset``)."""

    topic: str
    partition: int = Field(ge=0)
    offset: int | None = Field(default=None, ge=0, le=INT64_MAX)
    first_offset: int | None = Field(default=None, ge=0, le=INT64_MAX)
    last_offset: int | None = Field(default=None, ge=0, le=INT64_MAX)
    type: AcknowledgeType

    @model_validator(mode="after")
    def _one_range(self) -> Self:
        ranged = (self.first_offset is not None, self.last_offset is not None)
        if self.offset is not None and not any(ranged):
            return self
        if self.offset is None and all(ranged):
            assert self.first_offset is not None
            assert self.last_offset is not None
            if self.first_offset > self.last_offset:
                raise ValueError("first_offset must be <= last_offset")
            return self
        raise ValueError("give offset, or first_offset and last_offset")

    @property
    def first(self) -> int:
        first = self.offset if self.offset is not None else self.first_offset
        assert first is not None
        return first

    @property
    def last(self) -> int:
        last = self.offset if self.offset is not None else self.last_offset
        assert last is not None
        return last


class AcquireRequest(_Body):
    """``POST /share-groups/{group}/acquire``."""

    topics: list[str] = Field(min_length=1)
    #: The member the locks are taken for; generated (and answered) when absent.
    member_id: str | None = Field(default=None, min_length=1, max_length=249)
    max_records: int = Field(default=500, ge=1, le=MAX_ACQUIRE_RECORDS)
    #: Whether ``max_records`` may be exceeded to finish a record batch (``AcquireMode``).
    acquire_mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED
    #: How long to wait for records when none is available now (a long poll).
    timeout_ms: int = Field(default=1_000, ge=0)
    #: A record filter (docs/filters.md); records it rejects are acknowledged for the group.
    filter: str | None = None
    key_encoding: Encoding = Encoding.STRING
    value_encoding: Encoding = Encoding.JSON
    header_encoding: HeaderEncoding = HeaderEncoding.STRING
    #: Answers to records the member holds, applied before it acquires (Kafka's ShareFetch
    #: carries them so): each partition's entries at its leader, in one request and one
    #: state write with the partition's acquisition. Needs ``member_id``.
    acknowledgements: list[AckEntry] = Field(default_factory=list, max_length=MAX_ACK_ENTRIES)

    @model_validator(mode="after")
    def _acks_name_member(self) -> Self:
        if self.acknowledgements and self.member_id is None:
            raise ValueError("acknowledgements need the member_id that acquired the records")
        return self


class AcknowledgeRequest(_Body):
    """``POST /share-groups/{group}/acknowledgements``."""

    member_id: str = Field(min_length=1, max_length=249)
    acknowledgements: list[AckEntry] = Field(min_length=1, max_length=MAX_ACK_ENTRIES)


class AckEntryResult(BaseModel):
    """One entry's outcome: ``error`` None when applied (``{"code", "message"}`` if not)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    type: AcknowledgeType
    error: dict[str, str] | None = None


class AcknowledgeResponse(BaseModel):
    """Results in the order of the request's entries."""

    results: list[AckEntryResult]


class AcquireResponse(BaseModel):
    member_id: str
    #: How long the member holds what it acquired, from the answer (0: nothing acquired).
    lock_timeout_ms: int
    records: list[AcquiredRecord]
    errors: list[PartitionError] = Field(default_factory=list)
    #: One result per entry of the request's ``acknowledgements``, in their order.
    acknowledgement_results: list[AckEntryResult] = Field(default_factory=list)
