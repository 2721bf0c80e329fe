"""``GroupsView``: a read, then watch events; a direct read of one group masks older events."""

from __future__ import annotations

from yak.metadata.keyspace import Keyspace
from yak.metadata.models import GroupMember, GroupState
from yak.metadata.store import EventKind, KeyValue, RangeResult, WatchEvent
from yak_coordinator.groups.groups_view import GroupsView

KS = Keyspace("view")


def member_kv(group: str, member: str, revision: int) -> KeyValue:
    value = GroupMember(member_id=member, joined_at_ms=1).encode()
    return KeyValue(KS.group_member(group, member).encode(), value, revision, revision, 1)


def put(kv: KeyValue) -> WatchEvent:
    return WatchEvent(EventKind.PUT, kv.key, kv.value, kv.mod_revision)


def delete(key: str, revision: int) -> WatchEvent:
    return WatchEvent(EventKind.DELETE, key.encode(), b"", revision)


def view_with(*kvs: KeyValue, revision: int = 10) -> tuple[GroupsView, set[str]]:
    view = GroupsView(KS)
    touched = view.load(RangeResult(tuple(kvs), revision))
    return view, touched


def test_load_then_events() -> None:
    view, touched = view_with(member_kv("g", "a", 5), member_kv("h", "b", 6))
    assert touched == {"g", "h"}
    assert view.member_revisions("g") == {"a": 5}
    assert view.apply(put(member_kv("g", "c", 11))) == "g"
    state = GroupState(group_id="g", group_epoch=3)
    state_kv = KeyValue(KS.group_state("g").encode(), state.encode(), 12, 12, 1)
    assert view.apply(put(state_kv)) == "g"
    assert view.groups["g"].state == state
    assert view.groups["g"].state_revision == 12
    assert view.apply(delete(KS.group_member("h", "b"), 13)) == "h"
    assert "h" not in view.groups, "a group with nothing left is forgotten"
    positions = WatchEvent(EventKind.PUT, KS.group_positions("g", "a").encode(), b"{}", 14)
    assert view.apply(positions) is None, "positions are not kept"
    assert view.revision == 14


def test_a_direct_read_masks_older_events() -> None:
    view, _ = view_with(member_kv("g", "a", 5))
    # The controller's transaction read the group at 20: "a" was deleted at 15, "b" joined at 18.
    view.replace("g", [member_kv("g", "b", 18)], 20)
    assert set(view.groups["g"].live_members()) == {"b"}
    # The watch, behind, now delivers those same changes: nothing to do.
    assert view.apply(delete(KS.group_member("g", "a"), 15)) is None
    assert view.apply(put(member_kv("g", "b", 18))) is None
    assert view.apply(put(member_kv("g", "a", 19))) is None, "no resurrection"
    assert set(view.groups["g"].live_members()) == {"b"}
    assert view.apply(put(member_kv("g", "c", 21))) == "g"


def test_malformed_records_keep_their_revision_but_take_no_part() -> None:
    bad = KeyValue(KS.group_member("g", "x").encode(), b"not json", 7, 7, 1)
    bad_state = KeyValue(KS.group_state("g").encode(), b"{}", 8, 8, 1)
    view, _ = view_with(bad, bad_state, member_kv("g", "a", 6))
    records = view.groups["g"]
    assert set(records.live_members()) == {"a"}
    assert view.member_revisions("g") == {"a": 6, "x": 7}
    assert (records.state, records.state_revision) == (None, 8)


def test_keys_with_illegal_ids_are_ignored() -> None:
    key = f"{KS.group_members_prefix('g')}bad id!".encode()
    view, touched = view_with(KeyValue(key, b"{}", 3, 3, 1))
    assert touched == set()
    assert view.groups == {}
