"""Recall of earlier messages from Python, sync and async, with one suite.

The service indexes messages for their owner; the owner searches them across
chats, leaving out the current one. Vectors come from `FakeEmbedder` (conftest.py)
with known cosine similarities to the query, so scores are exact:
score = 1/(60 + vector rank) + 1/(60 + text rank).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

import pgmemory
from pgmemory import MessageHit
from tests.python.conftest import Blocking, Connect, FakeEmbedder, e, method, plus

OFFICE = "I work at the Lisbon office"  # full text: 'work', 'lisbon', 'offic'
SCHOOL = "Ana starts school in September"
WHERE = "Remind me where my office is"  # full text: 'remind', 'offic'
QUESTION = "Which office do I work at?"  # full text: 'offic' | 'work'
TEA = "Likes green tea"

TABLE: dict[str, list[float]] = {
    QUESTION: plus(e(0, 0.6), e(2, 0.8)),
    # Cosines with QUESTION: OFFICE 0.6, SCHOOL 0.48, WHERE 0.12.
    OFFICE: e(0),
    SCHOOL: plus(e(1, 0.8), e(2, 0.6)),
    WHERE: plus(e(0, 0.2), e(3, 0.98)),
    TEA: e(4),
}

T1 = datetime(2025, 3, 1, 9, 30, tzinfo=timezone.utc)
T2 = T1 + timedelta(minutes=1)
T3 = datetime(2025, 3, 8, 18, 0, tzinfo=timezone.utc)


def message(
    owner: uuid.UUID, chat: str, id: str, role: str, content: Any, **more: Any
) -> dict[str, Any]:
    base = {"id": id, "chat_id": chat, "owner_id": str(owner), "role": role, "content": content}
    return base | more


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder(TABLE)


@pytest.fixture
def service(connect: Connect, fake: FakeEmbedder) -> pgmemory.Memory | Blocking:
    svc = connect(embedder=fake)
    svc.configure_embeddings()
    return svc


def rows(db: psycopg.Connection, query: str, *params: Any) -> list[tuple[Any, ...]]:
    found = db.execute(query, params).fetchall()
    db.rollback()
    return found


def test_search_own_messages_across_chats(
    service: Any, fake: FakeEmbedder, db: psycopg.Connection, grant: Any, org: uuid.UUID
) -> None:
    user_id = grant()
    user = service.as_user(user_id)
    recall = service.recall
    assert recall.index(org, message(user_id, "chat-1", "m1", "user", OFFICE, created_at=T1))
    assert recall.index(org, message(user_id, "chat-1", "m2", "assistant", SCHOOL, created_at=T2))
    assert recall.index(
        org, message(user_id, "chat-2", "m1", "user", WHERE, created_at=T3.isoformat())
    )
    # One embedder call per message, with its content.
    assert fake.calls == [(method(service), [t]) for t in (OFFICE, SCHOOL, WHERE)]

    hits = user.recall.search(org, QUESTION, exclude_chat="chat-2")
    assert fake.calls[-1] == (method(service), [QUESTION])
    assert all(isinstance(h, MessageHit) for h in hits)
    # Vector ranks OFFICE 1, SCHOOL 2; full text finds OFFICE only.
    assert [(h.id, h.chat_id, h.role, h.content, h.score, h.created_at) for h in hits] == [
        ("m1", "chat-1", "user", OFFICE, 2 / 61, T1),
        ("m2", "chat-1", "assistant", SCHOOL, 1 / 62, T2),
    ]
    assert [h.similarity for h in hits] == pytest.approx([0.6, 0.48], abs=1e-6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hits[0].score = 1.0  # type: ignore[misc]

    # Without exclude_chat, chat-2's message ranks 3rd by vector and 2nd by text.
    everything = user.recall.search(org, QUESTION)
    assert [(h.chat_id, h.id, h.score) for h in everything] == [
        ("chat-1", "m1", 2 / 61),
        ("chat-2", "m1", 1 / 63 + 1 / 62),
        ("chat-1", "m2", 1 / 62),
    ]
    assert everything[1].created_at == T3
    assert [h.id for h in user.recall.search(org, QUESTION, k=1)] == ["m1"]
    text_only = user.recall.search(org, QUESTION, options={"vector_weight": 0})
    assert [(h.chat_id, h.score) for h in text_only[:2]] == [("chat-1", 1 / 61), ("chat-2", 1 / 62)]
    with pytest.raises(pgmemory.Invalid, match="k must be between 1 and 100"):
        user.recall.search(org, QUESTION, k=0)

    # Nobody else sees them: not another user, not an org admin.
    admin_id = grant()
    grant(admin_id, "memory.manage")
    for other in (service.as_user(grant()), service.as_user(admin_id)):
        assert other.recall.search(org, QUESTION) == []
        assert other.recall.delete_chat(org, "chat-1") == 0  # only one's own
    assert len(user.recall.search(org, QUESTION)) == 3

    # A user cannot index, not even their own messages.
    with pytest.raises(pgmemory.Forbidden) as caught:
        user.recall.index(org, message(user_id, "chat-3", "m1", "user", TEA))
    assert (caught.value.code, caught.value.sqlstate) == ("MEMORY_FORBIDDEN", "42501")
    # The same ids under another owner are that owner's own message: neither shadows the other.
    assert recall.index(org, message(admin_id, "chat-1", "m1", "user", TEA)) is True
    assert rows(db, "SELECT count(*) FROM memory.messages WHERE organization_id = %s", org) == [
        (4,)
    ]
    assert [h.content for h in user.recall.search(org, QUESTION)] == [OFFICE, WHERE, SCHOOL]
    assert [h.content for h in service.as_user(admin_id).recall.search(org, TEA)] == [TEA]


def test_search_and_recall_context_with_a_precomputed_query_embedding(
    connect: Connect, service: Any, fake: FakeEmbedder, grant: Any, org: uuid.UUID
) -> None:
    """`query_embedding` is used as given: no embedder call, with an embedder or without."""
    user_id = grant()
    for id, text, at in (("m1", OFFICE, T1), ("m2", SCHOOL, T2)):
        assert service.recall.index(
            org, message(user_id, "chat-1", id, "user", text, created_at=at)
        )
    user = service.as_user(user_id)
    user.archival.save(org, TEA)
    embedded = user.recall.search(org, QUESTION)
    context = user.recall_context(org, QUESTION)
    calls_before = len(fake.calls)
    plain = connect().as_user(user_id)
    for client in (user, plain):
        assert client.recall.search(org, QUESTION, query_embedding=TABLE[QUESTION]) == embedded
        assert client.recall_context(org, QUESTION, query_embedding=TABLE[QUESTION]) == context
    # The given vector ranks: SCHOOL's own puts it first by vector (OFFICE wins on text).
    school = user.recall.search(org, QUESTION, query_embedding=TABLE[SCHOOL])
    assert [(h.content, h.score, h.similarity) for h in school] == [
        (OFFICE, 1 / 62 + 1 / 61, 0.0),
        (SCHOOL, 1 / 61, 1.0),
    ]
    assert [(i.kind, i.content) for i in context] == [
        ("fact", TEA),
        ("message", OFFICE),
        ("message", SCHOOL),
    ]
    deep = {"ef_search": 10}
    assert user.recall.search(org, QUESTION, query_embedding=TABLE[QUESTION], options=deep) == (
        embedded
    )
    assert user.recall_context(org, QUESTION, options=deep, query_embedding=TABLE[QUESTION]) == (
        context
    )
    with pytest.raises(
        pgmemory.Invalid, match=r"^search option ef_search must be between 10 and 1000$"
    ):
        user.recall_context(
            org, QUESTION, options={"ef_search": 1001}, query_embedding=TABLE[QUESTION]
        )
    assert len(fake.calls) == calls_before


def test_temporary_chats_store_nothing(
    service: Any, fake: FakeEmbedder, db: psycopg.Connection, grant: Any, org: uuid.UUID
) -> None:
    user_id = grant()
    temp = message(user_id, "chat-t", "m1", "user", OFFICE, temporary=True)
    assert service.recall.index(org, temp) is False
    assert fake.calls == []  # not even sent to the embedder
    assert rows(db, "SELECT count(*) FROM memory.messages") == [(0,)]
    assert service.as_user(user_id).recall.search(org, QUESTION) == []
    # temporary False (or absent) stores it.
    assert service.recall.index(org, temp | {"temporary": False}) is True
    assert rows(db, "SELECT chat_id, message_id FROM memory.messages") == [("chat-t", "m1")]


def test_index_without_embedder_is_pending_until_embed_pending(
    connect: Connect,
    service: Any,
    fake: FakeEmbedder,
    db: psycopg.Connection,
    grant: Any,
    org: uuid.UUID,
) -> None:
    user_id = grant()
    plain = connect()  # the service without an embedder
    assert plain.recall.index(org, message(user_id, "chat-1", "m1", "user", OFFICE))
    assert plain.recall.index(org, message(user_id, "chat-1", "m2", "assistant", SCHOOL))
    plain.as_user(user_id).archival.save(org, TEA)  # a pending fact too
    assert fake.calls == []
    pending = "SELECT message_id, embedding IS NULL FROM memory.messages ORDER BY message_id"
    assert rows(db, pending) == [("m1", True), ("m2", True)]

    # Full text only while pending, even for a client with an embedder.
    hits = service.as_user(user_id).recall.search(org, QUESTION)
    assert [(h.id, h.score, h.similarity) for h in hits] == [("m1", 1 / 61, None)]

    # One embedder call for the facts' and messages' pending texts.
    assert service.embed_pending() == 3
    assert len(fake.calls) == 2  # the search's, then embed_pending's
    assert sorted(fake.calls[1][1]) == sorted([OFFICE, SCHOOL, TEA])
    assert rows(db, pending) == [("m1", False), ("m2", False)]
    hits = service.as_user(user_id).recall.search(org, QUESTION)
    assert [(h.id, h.score) for h in hits] == [("m1", 2 / 61), ("m2", 1 / 62)]
    assert hits[1].similarity == pytest.approx(0.48, abs=1e-6)

    # Re-indexing is idempotent; the same text keeps its embedding, a new one is pending.
    assert plain.recall.index(org, message(user_id, "chat-1", "m1", "user", OFFICE))
    assert plain.recall.index(org, message(user_id, "chat-1", "m2", "assistant", TEA))
    assert rows(db, pending) == [("m1", False), ("m2", True)]
    assert service.embed_pending() == 1
    assert fake.calls[-1] == (method(service), [TEA])


def test_delete_chat(service: Any, db: psycopg.Connection, grant: Any, org: uuid.UUID) -> None:
    alice_id, bob_id = grant(), grant()
    for owner, chat, text in (
        (alice_id, "chat-1", OFFICE),
        (alice_id, "chat-2", WHERE),
        (bob_id, "chat-b", SCHOOL),
    ):
        service.recall.index(org, message(owner, chat, "m1", "user", text))
        service.recall.index(org, message(owner, chat, "m2", "assistant", TEA))
    alice, bob = service.as_user(alice_id), service.as_user(bob_id)

    assert alice.recall.delete_chat(org, "chat-2") == 2
    assert {h.chat_id for h in alice.recall.search(org, QUESTION)} == {"chat-1"}
    assert alice.recall.delete_chat(org, "chat-b") == 0  # bob's
    assert alice.recall.delete_chat(org, "chat-2") == 0
    assert service.recall.delete_chat(org, "chat-b") == 2  # the service: anyone's
    assert bob.recall.search(org, QUESTION) == []
    left = "SELECT chat_id, message_id FROM memory.messages ORDER BY 1, 2"
    assert rows(db, left) == [("chat-1", "m1"), ("chat-1", "m2")]


def test_malformed_messages_are_refused(service: Any, grant: Any, org: uuid.UUID) -> None:
    user_id = grant()
    good = message(user_id, "chat-1", "m1", "user", OFFICE)
    for bad, text in (
        ({k: v for k, v in good.items() if k != "owner_id"}, "message owner_id must be a uuid"),
        (
            good | {"chat_id": ""},
            "message chat_id must be a non-empty string of at most 1024 bytes",
        ),
        (good | {"created_at": "last Tuesday"}, "message created_at must be a timestamp"),
        (good | {"temporary": "yes"}, "message temporary must be a boolean"),
    ):
        with pytest.raises(pgmemory.Invalid) as caught:
            service.recall.index(org, bad)
        assert caught.value.message == text
    # Non-text content is refused by the SQL, without an embedder call.
    calls_before = len(service.embedder.calls)
    with pytest.raises(pgmemory.Invalid, match="message content must be a string"):
        service.recall.index(org, good | {"content": 42})
    assert len(service.embedder.calls) == calls_before
