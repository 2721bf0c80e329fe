"""SecurityStore and SecurityCache on the in-memory MetadataStore: users, keys, passwords and
ACLs written by one instance and seen at once (through the watch) by another."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from argon2 import PasswordHasher

from yak.errors import (
    AuthenticationError,
    DuplicateResourceError,
    InvalidRequestError,
    ResourceNotFoundError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import (
    AclBinding,
    AclFilter,
    Operation,
    Permission,
    ResourceType,
    SecurityCache,
    SecurityStore,
)
from yak.security.store import MAX_ACLS_PER_CHANGE

KS = Keyspace("sec")
FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
TOPIC = ResourceType.TOPIC


@pytest.fixture
async def etcd() -> AsyncIterator[MemoryMetadataStore]:
    store = MemoryMetadataStore()
    yield store
    await store.aclose()


@pytest.fixture
async def caches(etcd: MemoryMetadataStore) -> AsyncIterator[tuple[SecurityCache, SecurityCache]]:
    """Two proxies' caches over one etcd."""
    pair = (
        SecurityCache(etcd, KS, hasher=FAST, super_users=["User:admin"]),
        SecurityCache(etcd, KS, hasher=FAST),
    )
    for cache in pair:
        await cache.start()
    yield pair
    for cache in pair:
        await cache.stop()


def admin(etcd: MemoryMetadataStore) -> SecurityStore:
    return SecurityStore(etcd, KS, hasher=FAST)


async def test_create_user_with_key_and_password(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    record, key, _ = await admin(etcd).create_user("alice", password="pw", with_key=True)
    assert key is not None
    assert key.token not in (await etcd.get(KS.principal("alice"))).value.decode()  # type: ignore[union-attr]
    for cache in caches:
        await cache.wait_for_revision(key.revision, timeout_s=1)
        assert await cache.authenticate_api_key(key.token) == "User:alice"
        assert await cache.authenticate_password("alice", "pw") == "User:alice"
        with pytest.raises(AuthenticationError):
            await cache.authenticate_password("alice", "wrong")
    assert record.principal == "User:alice"
    with pytest.raises(DuplicateResourceError):
        await admin(etcd).create_user("alice")


async def test_wrong_and_malformed_keys_are_refused(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    _, key, _ = await admin(etcd).create_user("bob", with_key=True)
    assert key is not None
    await caches[0].wait_for_revision(key.revision)
    wrong_secret = key.token[:-4] + ("aaaa" if not key.token.endswith("aaaa") else "bbbb")
    for token in ("", "garbage", wrong_secret, "yak_0000000000000000_" + "a" * 43):
        with pytest.raises(AuthenticationError):
            await caches[0].authenticate_api_key(token)


async def test_revocation_is_seen_at_once_by_another_instance(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    store = admin(etcd)
    _, old, _ = await store.create_user("carol", with_key=True)
    assert old is not None
    new = await store.add_key("carol", "rotation")
    for cache in caches:
        await cache.wait_for_revision(new.revision)
        assert await cache.authenticate_api_key(old.token) == "User:carol"  # now cached
        assert await cache.authenticate_api_key(new.token) == "User:carol"
    revision = await store.revoke_key("carol", old.key_id)
    async with asyncio.timeout(0.5):
        for cache in caches:
            await cache.wait_for_revision(revision)
    for cache in caches:
        with pytest.raises(AuthenticationError):
            await cache.authenticate_api_key(old.token)
        assert await cache.authenticate_api_key(new.token) == "User:carol"
    with pytest.raises(ResourceNotFoundError):
        await store.revoke_key("carol", old.key_id)


async def test_deleting_a_user_revokes_everything(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    store = admin(etcd)
    _, key, _ = await store.create_user("dave", password="pw", with_key=True)
    assert key is not None
    await caches[1].wait_for_revision(key.revision)
    assert await caches[1].authenticate_api_key(key.token) == "User:dave"
    await caches[1].wait_for_revision(await store.delete_user("dave"))
    with pytest.raises(AuthenticationError):
        await caches[1].authenticate_api_key(key.token)
    with pytest.raises(AuthenticationError):
        await caches[1].authenticate_password("dave", "pw")
    with pytest.raises(ResourceNotFoundError):
        await store.delete_user("dave")


async def test_password_change_and_removal(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    store = admin(etcd)
    await store.create_user("erin", password="one")
    await caches[0].wait_for_revision(await store.set_password("erin", "two"))
    with pytest.raises(AuthenticationError):
        await caches[0].authenticate_password("erin", "one")
    assert await caches[0].authenticate_password("erin", "two") == "User:erin"
    await caches[0].wait_for_revision(await store.set_password("erin", None))
    with pytest.raises(AuthenticationError):
        await caches[0].authenticate_password("erin", "two")
    with pytest.raises(ResourceNotFoundError):
        await store.set_password("nobody", "x")


async def test_concurrent_key_additions_all_land(etcd: MemoryMetadataStore) -> None:
    store = admin(etcd)
    await store.create_user("frank")
    keys = await asyncio.gather(*(store.add_key("frank") for _ in range(5)))
    record = await store.get_user("frank")
    assert set(record.keys) == {key.key_id for key in keys}


async def test_acls_reach_every_authorizer_at_once(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    store = admin(etcd)
    read = AclBinding("User:alice", TOPIC, "orders", Operation.READ)
    deny = AclBinding("User:alice", TOPIC, "*", Operation.WRITE, Permission.DENY)
    revision = await store.add_acls([read, deny, read])
    for cache in caches:
        await cache.wait_for_revision(revision)
        assert cache.authorizer.authorize("User:alice", TOPIC, "orders", Operation.READ)
        assert not cache.authorizer.authorize("User:alice", TOPIC, "orders", Operation.WRITE)
    assert caches[0].authorizer.authorize("User:admin", TOPIC, "x", Operation.WRITE)
    assert not caches[1].authorizer.authorize("User:admin", TOPIC, "x", Operation.WRITE)
    assert sorted(await store.list_acls(), key=lambda a: a.operation) == [read, deny]
    removed, revision = await store.remove_acls(AclFilter(operation=Operation.READ))
    assert removed == [read]
    for cache in caches:
        await cache.wait_for_revision(revision)
        assert not cache.authorizer.authorize("User:alice", TOPIC, "orders", Operation.READ)
    assert await store.remove_acls(AclFilter(operation=Operation.READ)) == ([], 0)


async def test_a_malformed_value_is_ignored(
    etcd: MemoryMetadataStore, caches: tuple[SecurityCache, SecurityCache]
) -> None:
    revision = await etcd.put(KS.principal("broken"), b"{not json")
    revision = max(revision, await etcd.put(KS.acl("broken"), b"[]"))
    await caches[0].wait_for_revision(revision)
    assert "broken" not in caches[0].users


async def test_invalid_user_names(etcd: MemoryMetadataStore) -> None:
    for bad in ("", "a/b", "..", "x" * 250):
        with pytest.raises(InvalidRequestError):
            await admin(etcd).create_user(bad)


async def test_many_acls_are_refused_at_once_but_removed_in_chunks(
    etcd: MemoryMetadataStore,
) -> None:
    store = admin(etcd)
    acls = [
        AclBinding("User:alice", TOPIC, f"t{i}", Operation.READ)
        for i in range(MAX_ACLS_PER_CHANGE + 1)
    ]
    with pytest.raises(InvalidRequestError, match="at most"):
        await store.add_acls(acls)
    await store.add_acls(acls[:MAX_ACLS_PER_CHANGE])
    await store.add_acls(acls[MAX_ACLS_PER_CHANGE:])
    removed, _ = await store.remove_acls(AclFilter(principal="User:alice"))
    assert len(removed) == MAX_ACLS_PER_CHANGE + 1
    assert await store.list_acls() == []
