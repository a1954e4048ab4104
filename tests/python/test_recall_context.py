"""recall_context from Python, sync and async: ContextItems in order, replays, routing.

Vectors come from `FakeEmbedder` (conftest.py) with known cosine similarities to
the question, so the order of facts and messages is exact.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import psycopg
import pytest

import pgmemory
from pgmemory import AsyncMemory, ContextItem, Memory
from tests.conftest import ServerInfo
from tests.python.conftest import FakeEmbedder, e, method, plus

QUESTION = "Which office do I work at?"
OFFICE = "Works at the Lisbon office"
TEA = "Likes green tea"
SAID = "I moved to the Porto office"
TABLE = {
    QUESTION: plus(e(0, 0.6), e(2, 0.8)),
    OFFICE: e(0),  # cosine 0.6 with the question
    TEA: e(4),  # 0
    SAID: plus(e(0, 0.8), e(2, 0.6)),  # 0.96
}
NOTES = {"command": "create", "path": "/memories/notes.md", "file_text": "Prefers short answers\n"}
CORE = '<memory_file path="/memories/notes.md" scope="user">\nPrefers short answers\n</memory_file>'


def test_recall_context_returns_context_items_and_replays(
    connect: Any, grant: Any, org: uuid.UUID, db: psycopg.Connection
) -> None:
    fake = FakeEmbedder(TABLE)
    service = connect(embedder=fake)
    service.configure_embeddings()
    user_id = grant()
    user = service.as_user(user_id)
    user.run(org, NOTES)
    office = user.archival.save(org, OFFICE)
    tea = user.archival.save(org, TEA)
    message = {"id": "m1", "chat_id": "c1", "owner_id": str(user_id), "role": "user"}
    service.recall.index(org, message | {"content": SAID})
    row = db.execute("SELECT id FROM memory.messages WHERE message_id = 'm1'").fetchone()
    db.rollback()
    assert row is not None

    first = user.recall_context(org, QUESTION, options={"operation_id": "turn-1"})
    assert fake.calls[-1] == (method(service), [QUESTION])  # the query, embedded once
    assert first == [
        ContextItem("core", "core", CORE),
        ContextItem(f"fact:{office}", "fact", OFFICE),
        ContextItem(f"fact:{tea}", "fact", TEA),
        ContextItem(f"message:{row[0]}", "message", SAID),
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first[0].content = ""  # type: ignore[misc]
    user.archival.forget(org, office)
    assert user.recall_context(org, TEA, options={"operation_id": "turn-1"}) == first
    assert user.recall_context(org, QUESTION, options={"exclude_chat": "c1", "facts": 1}) == [
        ContextItem("core", "core", CORE),
        ContextItem(f"fact:{tea}", "fact", TEA),
    ]
    with pytest.raises(pgmemory.Invalid, match=r"^option facts must be between 0 and 1000$"):
        user.recall_context(org, QUESTION, options={"facts": 1001})


@pytest.mark.parametrize("side", ["sync", "async"])
def test_only_a_call_without_operation_id_goes_to_the_replica(
    side: str, dsn: str, pg_server: ServerInfo, grant: Any, org: uuid.UUID
) -> None:
    """The "replica" is the server's maintenance database, where memory is not installed:
    a call sent there fails, so where each call went is plain."""
    replica = f"postgresql://postgres@/postgres?host={pg_server.host}&port={pg_server.port}"
    user_id = grant()
    missing = "^the memory extension is not installed in this database"

    if side == "sync":
        with Memory(dsn, service=True, replica=replica) as mem:
            user = mem.as_user(user_id)
            user.run(org, NOTES)
            kept = user.recall_context(org, "notes", options={"operation_id": "turn-1"})
            with pytest.raises(pgmemory.SetupError, match=missing):
                user.recall_context(org, "notes")
    else:

        async def main() -> list[ContextItem]:
            async with AsyncMemory(dsn, service=True, replica=replica) as mem:
                user = mem.as_user(user_id)
                await user.run(org, NOTES)
                kept = await user.recall_context(org, "notes", options={"operation_id": "turn-1"})
                with pytest.raises(pgmemory.SetupError, match=missing):
                    await user.recall_context(org, "notes", options={"operation_id": None})
                return kept

        kept = asyncio.run(main())
    assert kept == [ContextItem("core", "core", CORE)]
