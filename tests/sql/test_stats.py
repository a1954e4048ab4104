"""memory.stats and memory.list_facts: looking at a namespace without changing it."""

from __future__ import annotations

import uuid

from tests.support import Failure, snapshot

STATS = "SELECT memory.stats(%s, %s)"
LIST = "SELECT id, content, version, forgotten_at IS NOT NULL, superseded_by, embedding_pending FROM memory.list_facts(%s, %s, %s, %s, %s)"
ZERO = {
    "files": 0,
    "facts": 0,
    "facts_pending": 0,
    "forgotten": 0,
    "messages": 0,
    "messages_pending": 0,
}
NO_READ = Failure(
    "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
)


def _fill(service, org, user_id):
    mine = {"owner_id": str(user_id)}
    service.value("SELECT memory.configure_embeddings(4)")
    service.run(org, {"command": "create", "path": "/memories/a.md", "file_text": "a\n"}, mine)
    save = "SELECT memory.save_fact(%s, %s, %s::real[], %s)"
    ids = [
        service.value(save, org, "Lives in Porto", [1, 0, 0, 0], mine),
        service.value(save, org, "Lives in Lisbon", [0, 1, 0, 0], mine),
        service.value(save, org, "Has a cat", None, mine),
        service.value(save, org, "Plays chess", None, mine),
    ]
    service.rows("SELECT memory.forget(%s, %s, %s)", org, ids[0], ids[1])
    for mid, vector in (("m1", [0, 0, 1, 0]), ("m2", None)):
        message = {"id": mid, "chat_id": "c1", "owner_id": str(user_id), "role": "user"}
        service.value(
            "SELECT memory.index_message(%s, %s, %s::real[])",
            org,
            {**message, "content": f"message {mid}"},
            vector,
        )
    return ids


def test_stats_count_without_leasing_anything(service, member, org, db):
    alice_id, alice = member()
    assert alice.value(STATS, org, {}) == ZERO
    _fill(service, org, alice_id)
    before = snapshot(db), db.execute("SELECT lease_until FROM memory.facts").fetchall()
    expected = {
        "files": 1,
        "facts": 3,
        "facts_pending": 2,
        "forgotten": 1,
        "messages": 2,
        "messages_pending": 1,
    }
    assert alice.value(STATS, org, {}) == expected
    assert service.value(STATS, org, {"owner_id": str(alice_id)}) == expected
    assert (snapshot(db), db.execute("SELECT lease_until FROM memory.facts").fetchall()) == before
    # Everything pending is still offered to an embedding worker.
    assert len(service.rows("SELECT id FROM memory.pending_embeddings(10)")) == 3


def test_stats_are_the_callers_own(service, member, org):
    alice_id, _ = member()
    _fill(service, org, alice_id)
    _, bob = member()
    _, admin = member("memory.read", "memory.manage")
    _, elsewhere = member(organization=uuid.uuid4())
    assert bob.value(STATS, org, {}) == ZERO
    assert admin.value(STATS, org, {}) == ZERO
    assert admin.fails(STATS, org, {"owner_id": str(alice_id)}) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id"
    )
    assert elsewhere.fails(STATS, org, {}) == NO_READ


def test_list_facts_pages_oldest_first(service, member, org):
    alice_id, alice = member()
    porto, lisbon, cat, chess = _fill(service, org, alice_id)
    first = alice.rows(LIST, org, {}, 2, None, False)
    assert [(r[0], r[1], r[3], r[5]) for r in first] == [
        (lisbon, "Lives in Lisbon", False, False),
        (cat, "Has a cat", False, True),
    ]
    assert [r[0] for r in alice.rows(LIST, org, {}, 2, cat, False)] == [chess]
    assert alice.rows(LIST, org, {}, 2, chess, False) == []
    everything = alice.rows(LIST, org, {}, 10, None, True)
    assert [(r[0], r[3], r[4]) for r in everything] == [
        (porto, True, lisbon),
        (lisbon, False, None),
        (cat, False, None),
        (chess, False, None),
    ]


def test_list_facts_continues_only_from_the_callers_own_facts(service, member, org):
    alice_id, _ = member()
    alice_facts = _fill(service, org, alice_id)
    _, bob = member()
    random_id = uuid.uuid4()
    for after in (random_id, alice_facts[1]):
        assert bob.fails(LIST, org, {}, 10, after, False) == Failure(
            "P0002", "MEMORY_NOT_FOUND", f"fact {after} does not exist"
        )
    assert bob.rows(LIST, org, {}, 10, None, True) == []


def test_list_facts_refuses_a_bad_page_size(member, org):
    _, alice = member()
    for size in (0, 1001, None):
        assert alice.fails(LIST, org, {}, size, None, False) == Failure(
            "22023", "MEMORY_INVALID", "max must be between 1 and 1000"
        )
