"""Recall: messages indexed by the service, searched by their owner across chats."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import USER_LOGIN
from tests.support import Failure, user_claims


def _message(owner, chat, mid, content, **extra):
    return {
        "id": mid,
        "chat_id": chat,
        "owner_id": str(owner),
        "role": "user",
        "content": content,
        **extra,
    }


def _index(service, org, message, embedding=None):
    return service.value("SELECT memory.index_message(%s, %s, %s::real[])", org, message, embedding)


def test_temporary_chats_leave_no_row(dims4, org, db):
    owner = uuid.uuid4()
    temp = _message(owner, "incognito", "m1", "secret plans", temporary=True)
    assert _index(dims4, org, temp, [1.0, 0.0, 0.0, 0.0]) is False
    for table in ("namespaces", "files", "facts", "messages", "documents"):
        assert db.execute(f"SELECT count(*) FROM memory.{table}").fetchone() == (0,), table
    assert dims4.rows("SELECT * FROM memory.pending_embeddings(10)") == []


def test_index_is_idempotent_and_changed_content_is_pending_again(dims4, org):
    owner = uuid.uuid4()
    message = _message(owner, "c1", "m1", "My sister Ana lives in Porto")
    assert _index(dims4, org, message, [1.0, 0.0, 0.0, 0.0]) is True
    assert _index(dims4, org, message) is True  # same text, no vector: the embedding stays
    rows = dims4.rows("SELECT message_id, content, embedding IS NOT NULL FROM memory.messages")
    assert rows == [("m1", "My sister Ana lives in Porto", True)]
    _index(dims4, org, {**message, "content": "My sister Ana moved to Lisbon"})
    rows = dims4.rows("SELECT content, embedding IS NULL FROM memory.messages")
    assert rows == [("My sister Ana moved to Lisbon", True)]
    pending = dims4.rows("SELECT kind, content FROM memory.pending_embeddings(10)")
    assert pending == [("message", "My sister Ana moved to Lisbon")]


def test_pending_messages_go_through_the_same_pipeline(dims4, org):
    owner = uuid.uuid4()
    _index(dims4, org, _message(owner, "c1", "m1", "first"))
    dims4.value("SELECT memory.save_fact(%s, 'a fact', NULL, %s)", org, {"owner_id": str(owner)})
    batch = dims4.rows(
        "SELECT id, kind, content_hash FROM memory.pending_embeddings(10) ORDER BY kind"
    )
    assert [r[1] for r in batch] == ["fact", "message"]
    written = dims4.value(
        "SELECT memory.set_memory_embeddings(%s, %s, %s, 'm')",
        [r[0] for r in batch],
        [r[2] for r in batch],
        [[1, 0, 0, 0], [0, 1, 0, 0]],
    )
    assert written == 2
    assert dims4.rows("SELECT embedding_model FROM memory.messages") == [("m",)]


def test_search_own_messages_across_chats_excluding_the_current_one(dims4, org, member):
    alice_id, alice = member()
    bob_id, bob = member("memory.read", "memory.manage")
    _index(
        dims4,
        org,
        _message(alice_id, "chat-1", "a1", "My sister Ana lives in Porto"),
        [1.0, 0.0, 0.0, 0.0],
    )
    _index(
        dims4,
        org,
        _message(alice_id, "chat-2", "a2", "Ana is visiting next week"),
        [0.9, 0.1, 0.0, 0.0],
    )
    _index(
        dims4,
        org,
        _message(bob_id, "chat-9", "b1", "Ana from accounting called"),
        [1.0, 0.0, 0.0, 0.0],
    )
    hits = alice.rows(
        "SELECT id, chat_id, role, content FROM memory.search_messages(%s, 'where does Ana live', '{1,0,0,0}'::real[])",
        org,
    )
    assert hits == [
        ("a1", "chat-1", "user", "My sister Ana lives in Porto"),
        ("a2", "chat-2", "user", "Ana is visiting next week"),
    ]
    excluded = alice.rows(
        "SELECT id FROM memory.search_messages(%s, 'Ana', '{1,0,0,0}'::real[], 'chat-2')", org
    )
    assert excluded == [("a1",)]
    # Bob (an org admin) finds only his own message, text-only too.
    assert bob.rows("SELECT id FROM memory.search_messages(%s, 'Ana sister Porto', NULL)", org) == [
        ("b1",)
    ]
    assert bob.rows("SELECT id FROM memory.search_messages(%s, 'sister', NULL)", org) == []


def test_search_messages_bounds_and_identity(dims4, org, as_, login_dsn):
    user = uuid.uuid4()
    outsider = as_(user_claims(user))
    assert outsider.fails("SELECT * FROM memory.search_messages(%s, 'x')", org) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )
    dims4.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user)
    assert outsider.fails(
        "SELECT * FROM memory.search_messages(%s, 'x', NULL, NULL, 101)", org
    ) == Failure("22023", "MEMORY_INVALID", "k must be between 1 and 100")
    assert dims4.fails("SELECT * FROM memory.search_messages(%s, 'x')", org) == Failure(
        "22023", "MEMORY_INVALID", "the service must pass owner_id for a user namespace"
    )
    web = as_(user_claims(user), login_dsn(USER_LOGIN))
    message = _message(user, "c", "m", "hello")
    assert web.fails("SELECT memory.index_message(%s, %s)", org, message) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this"
    )


@pytest.mark.parametrize(
    ("message", "text"),
    [
        (
            {"id": "m", "chat_id": "c", "role": "user", "content": "x"},
            "message owner_id must be a uuid",
        ),
        (
            {"id": "m", "chat_id": "c", "owner_id": "nope", "role": "user", "content": "x"},
            "message owner_id must be a uuid",
        ),
        (
            {"chat_id": "c", "owner_id": str(uuid.UUID(int=1)), "role": "user", "content": "x"},
            "message id must be a non-empty string of at most 1024 bytes",
        ),
        (
            {
                "id": "m",
                "chat_id": "c" * 1025,
                "owner_id": str(uuid.UUID(int=1)),
                "role": "user",
                "content": "x",
            },
            "message chat_id must be a non-empty string of at most 1024 bytes",
        ),
        (
            {"id": "m", "chat_id": "c", "owner_id": str(uuid.UUID(int=1)), "content": "x"},
            "message role must be a non-empty string of at most 64 bytes",
        ),
        (
            {"id": "m", "chat_id": "c", "owner_id": str(uuid.UUID(int=1)), "role": "user"},
            "message content must be a string",
        ),
        (
            {
                "id": "m",
                "chat_id": "c",
                "owner_id": str(uuid.UUID(int=1)),
                "role": "user",
                "content": "x",
                "temporary": "yes",
            },
            "message temporary must be a boolean",
        ),
        (
            {
                "id": "m",
                "chat_id": "c",
                "owner_id": str(uuid.UUID(int=1)),
                "role": "user",
                "content": "x",
                "created_at": "soon",
            },
            "message created_at must be a timestamp",
        ),
    ],
)
def test_index_message_refuses_malformed_messages(dims4, org, db, message, text):
    assert dims4.fails("SELECT memory.index_message(%s, %s)", org, message) == Failure(
        "22023", "MEMORY_INVALID", text
    )
    assert db.execute("SELECT count(*) FROM memory.messages").fetchone() == (0,)


def test_a_message_keeps_its_owner(dims4, org):
    """The same chat and message ids under another owner are that owner's own row."""
    first, second = uuid.uuid4(), uuid.uuid4()
    _index(dims4, org, _message(first, "shared-chat", "m1", "mine"))
    assert (
        dims4.value(
            "SELECT memory.index_message(%s, %s)",
            org,
            _message(second, "shared-chat", "m1", "theirs"),
        )
        is True
    )
    _index(dims4, org, _message(first, "shared-chat", "m1", "mine, edited"))
    assert dims4.rows(
        "SELECT n.owner_id, m.content FROM memory.messages m JOIN memory.namespaces n"
        " ON n.organization_id = m.organization_id AND n.id = m.namespace_id ORDER BY 2"
    ) == sorted([(first, "mine, edited"), (second, "theirs")], key=lambda r: r[1])


def test_delete_chat(dims4, org, member):
    alice_id, alice = member()
    bob_id, _ = member()
    for owner, mid in ((alice_id, "a1"), (alice_id, "a2"), (bob_id, "b1")):
        _index(dims4, org, _message(owner, "group-chat", mid, "hello " + mid))
    _index(dims4, org, _message(alice_id, "other", "a3", "kept"))
    assert alice.value("SELECT memory.delete_chat(%s, 'group-chat')", org) == 2
    assert dims4.rows("SELECT message_id FROM memory.messages ORDER BY 1") == [("a3",), ("b1",)]
    assert dims4.value("SELECT memory.delete_chat(%s, 'group-chat')", org) == 1
    assert dims4.rows("SELECT message_id FROM memory.messages") == [("a3",)]


@pytest.mark.parametrize("when", ["yesterday", "now", "infinity", "2026-13-01", "1 day ago"])
def test_created_at_must_be_iso_8601(dims4, org, when):
    message = _message(uuid.uuid4(), "c", "m", "x", created_at=when)
    assert dims4.fails("SELECT memory.index_message(%s, %s)", org, message) == Failure(
        "22023", "MEMORY_INVALID", "message created_at must be a timestamp"
    )


def test_embedding_model_is_recorded_with_a_vector(dims4, org):
    owner = uuid.uuid4()
    message = _message(
        owner, "c", "m", "x", created_at="2026-11-30T10:00:00Z", embedding_model="mini"
    )
    _index(dims4, org, message, [1.0, 0.0, 0.0, 0.0])
    assert dims4.rows("SELECT embedding_model, created_at::text FROM memory.messages") == [
        ("mini", "2026-11-30 10:00:00+00")
    ]
