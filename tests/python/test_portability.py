"""Erasure and portability from Python, sync and async, with one suite.

`export` gives every memory of a namespace as JSON (files with versions, facts
with embeddings and history, messages); `import_` loads it back; `erase_user`
deletes everything of a user in an organization and returns counts.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

import pgmemory
from tests.python.conftest import Connect, FakeEmbedder, e, plus

TEA, CAR, CAR_2, CAT = "Likes green tea", "Drives a blue car", "Drives a red car now", "Has a cat"
HELLO, REPLY = "I drive a blue car", "Noted, a blue car"
TABLE = {
    TEA: e(0),
    CAR: e(1),
    CAR_2: plus(e(1, 0.6), e(2, 0.8)),
    HELLO: plus(e(1, 0.8), e(3, 0.6)),
    "blue car": e(1),
}
AGENT = {"scope": "agent", "agent_id": "planner"}
COPY = {"scope": "agent", "agent_id": "copy"}


@pytest.fixture
def service(connect: Connect) -> Any:
    svc = connect(embedder=FakeEmbedder(TABLE))
    svc.configure_embeddings()
    return svc


def fill(connect: Connect, service: Any, org: uuid.UUID, user_id: uuid.UUID) -> None:
    """Of the user: a file (version 2), four facts (one superseded, one pending) and two
    messages (one pending); and a file in their agent namespace."""
    user, plain = service.as_user(user_id), connect()  # plain: the service, no embedder
    user.write(org, "/memories/prefs.md", "Metric units.\n")
    user.write(org, "/memories/prefs.md", "Metric units.\nGreen tea.\n", 1)
    user.write(org, "/memories/plan.md", "Plan first.\n", ns=AGENT)
    user.archival.save(org, TEA, source={"chat": "chat-1"})
    car = user.archival.save(org, CAR)
    user.archival.forget(org, car, superseded_by=user.archival.save(org, CAR_2))
    plain.as_user(user_id).archival.save(org, CAT)
    base = {"chat_id": "chat-1", "owner_id": str(user_id)}
    service.recall.index(org, base | {"id": "m1", "role": "user", "content": HELLO})
    plain.recall.index(org, base | {"id": "m2", "role": "assistant", "content": REPLY})


def without_namespace(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "namespace"}


def count_rows(db: psycopg.Connection, org: uuid.UUID, owner: uuid.UUID) -> dict[str, int]:
    """Rows of `owner` in `org`, table by table."""
    counts = {}
    for table in ("files", "facts", "messages"):
        counts[table] = db.execute(
            f"SELECT count(*) FROM memory.{table} t JOIN memory.namespaces n"
            " ON n.organization_id = t.organization_id AND n.id = t.namespace_id"
            " WHERE t.organization_id = %s AND n.owner_id = %s",
            (org, owner),
        ).fetchall()[0][0]
    for table, column in (("namespaces", "owner_id"), ("permissions", "user_id")):
        counts[table] = db.execute(
            f"SELECT count(*) FROM memory.{table} WHERE organization_id = %s AND {column} = %s",
            (org, owner),
        ).fetchall()[0][0]
    db.rollback()
    return counts


def test_export_holds_everything_of_a_namespace(
    connect: Connect, service: Any, grant: Any, org: uuid.UUID
) -> None:
    alice_id = grant()
    fill(connect, service, org, alice_id)
    data = service.as_user(alice_id).export(org)
    assert (data["format"], data["version"], data["namespace"]) == (
        "pgmemory",
        1,
        {"scope": "user"},
    )
    assert [(f["path"], f["content"], f["version"]) for f in data["files"]] == [
        ("/memories/prefs.md", "Metric units.\nGreen tea.\n", 2)
    ]
    facts = {f["content"]: f for f in data["facts"]}
    assert [f["content"] for f in data["facts"]] == [TEA, CAR, CAR_2, CAT]  # by creation
    assert facts[TEA]["source"] == {"chat": "chat-1"}
    assert (facts[CAR]["superseded_by"], facts[CAR]["forgotten_at"] is None) == (
        facts[CAR_2]["id"],
        False,
    )
    assert [facts[t]["embedding"] for t in (TEA, CAR, CAR_2, CAT)] == [
        TABLE[TEA],
        TABLE[CAR],
        pytest.approx(TABLE[CAR_2]),
        None,
    ]
    assert [(m["id"], m["chat_id"], m["role"], m["content"]) for m in data["messages"]] == [
        ("m1", "chat-1", "user", HELLO),
        ("m2", "chat-1", "assistant", REPLY),
    ]
    assert data["messages"][0]["embedding"] == pytest.approx(TABLE[HELLO])
    assert data["messages"][1]["embedding"] is None
    # The service exports any user's namespace; the agent namespace holds its one file.
    assert service.export(org, {"owner_id": str(alice_id)}) == data
    agent = service.export(org, AGENT | {"owner_id": str(alice_id)})
    assert agent["namespace"] == AGENT
    assert [f["path"] for f in agent["files"]] == ["/memories/plan.md"]
    assert (agent["facts"], agent["messages"]) == ([], [])
    # Nobody else exports it: another user gets their own (empty) namespace.
    other = service.as_user(grant()).export(org)
    assert (other["files"], other["facts"], other["messages"]) == ([], [], [])


def test_import_into_another_namespace(
    connect: Connect, service: Any, grant: Any, org: uuid.UUID
) -> None:
    alice_id = grant()
    fill(connect, service, org, alice_id)
    alice = service.as_user(alice_id)
    agent = alice.export(org, AGENT)
    assert alice.import_(org, agent, ns=COPY) == {"files": 1, "facts": 0, "messages": 0}
    copy = alice.export(org, COPY)
    assert copy["namespace"] == COPY
    assert without_namespace(copy) == without_namespace(agent)
    # The same items again: refused, nothing loaded.
    with pytest.raises(pgmemory.Exists):
        alice.import_(org, agent, ns=COPY)
    assert alice.export(org, COPY) == copy
    # Messages are the service's to import; a user's export with them is refused whole.
    bob_id = grant()
    bob = service.as_user(bob_id)
    with pytest.raises(pgmemory.Forbidden, match="only the service may import messages"):
        bob.import_(org, alice.export(org))
    assert without_namespace(bob.export(org)) == {
        "format": "pgmemory",
        "version": 1,
        "files": [],
        "facts": [],
        "messages": [],
    }
    # Without them it loads next to the original: a user's facts get ids of their own.
    mine = alice.export(org) | {"messages": []}
    assert bob.import_(org, mine) == {"files": 1, "facts": 4, "messages": 0}
    copied = bob.export(org)
    assert [f["content"] for f in copied["facts"]] == [f["content"] for f in mine["facts"]]
    assert not {f["id"] for f in copied["facts"]} & {f["id"] for f in mine["facts"]}
    # The service keeps the ids, so next to the original it is refused, nothing loaded.
    with pytest.raises(pgmemory.Exists):
        service.import_(org, alice.export(org), ns={"owner_id": str(uuid.uuid4())})
    messages_only = alice.export(org) | {"files": [], "facts": []}
    with pytest.raises(pgmemory.Invalid) as caught:
        service.import_(org, messages_only, ns=AGENT | {"owner_id": str(alice_id)})
    assert caught.value.message == "messages can only be imported into a user namespace"
    with pytest.raises(pgmemory.Invalid, match="not a pgmemory export"):
        alice.import_(org, {"files": []})


def test_erase_user_then_take_the_memory_elsewhere(
    connect: Connect, service: Any, db: psycopg.Connection, grant: Any, org: uuid.UUID
) -> None:
    alice_id, bob_id, carol_id = grant(), grant(), grant()
    fill(connect, service, org, alice_id)
    bob = service.as_user(bob_id)
    bob.write(org, "/memories/bob.md", "Bob's\n")
    bob_fact = bob.archival.save(org, TEA)
    alice = service.as_user(alice_id)
    data = alice.export(org)
    bob_before = bob.export(org)

    with pytest.raises(pgmemory.Forbidden):
        alice.erase_user(org, alice_id)  # the service only
    assert service.erase_user(org, alice_id) == {
        "files": 2,
        "facts": 4,
        "messages": 2,
        "namespaces": 2,
        "permissions": 1,
    }
    zero = {"files": 0, "facts": 0, "messages": 0, "namespaces": 0, "permissions": 0}
    assert count_rows(db, org, alice_id) == zero
    assert count_rows(db, org, bob_id) == {
        "files": 1,
        "facts": 1,
        "messages": 0,
        "namespaces": 1,
        "permissions": 1,
    }
    assert bob.export(org) == bob_before
    assert bob.archival.get(org, bob_fact)["content"] == TEA
    assert service.erase_user(org, alice_id) == zero

    # The service loads the export for another owner: the same items, ids, versions, embeddings.
    carol = service.as_user(carol_id)
    assert service.import_(org, data, ns={"owner_id": str(carol_id)}) == {
        "files": 1,
        "facts": 4,
        "messages": 2,
    }
    assert carol.export(org) == data
    assert [h.id for h in carol.recall.search(org, "blue car")] == ["m1", "m2"]
    # CAR stays superseded (hidden); CAT is pending and shares no word with the query.
    assert [h.content for h in carol.archival.search(org, "blue car")] == [CAR_2, TEA]
