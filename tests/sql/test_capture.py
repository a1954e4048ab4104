"""Capture: the queue of chats whose new messages wait to become facts (service only)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.support import Failure

CAPTURES = "SELECT capture_id, org, owner_id, chat_id, messages, context FROM memory.pending_captures(%s, %s)"


def _index(service, org, owner, chat, mid, content, when, **extra):
    message = {
        "id": mid,
        "chat_id": chat,
        "owner_id": str(owner),
        "role": "user",
        "content": content,
        "created_at": f"2025-03-01T09:{when:02d}:00Z",
        **extra,
    }
    return service.value("SELECT memory.index_message(%s, %s)", org, message)


def _lease(service, max=10, max_messages=50):
    return service.rows(CAPTURES, max, max_messages)


def _ids(messages):
    return [m["id"] for m in messages]


def _status(service, org, chat=None):
    return service.rows(
        "SELECT chat_id, owner_id, pending_messages, attempts, status, last_error,"
        " captured_at FROM memory.capture_status(%s, %s)",
        org,
        chat,
    )


def test_indexed_chats_are_leased_once_with_their_messages(service, org):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "I moved to Porto", 1)
    _index(service, org, owner, "c1", "m2", "My sister is Ana", 2)
    [(capture_id, got_org, got_owner, chat, messages, context)] = _lease(service)
    assert (got_org, got_owner, chat, context) == (org, owner, "c1", [])
    assert messages == [
        {
            "id": "m1",
            "role": "user",
            "content": "I moved to Porto",
            "created_at": "2025-03-01T09:01:00+00:00",
        },
        {
            "id": "m2",
            "role": "user",
            "content": "My sister is Ana",
            "created_at": "2025-03-01T09:02:00+00:00",
        },
    ]
    assert isinstance(capture_id, uuid.UUID)
    assert _lease(service) == []  # never handed twice within a lease
    assert _status(service, org) == [("c1", owner, 2, 0, "leased", None, None)]


def test_an_expired_lease_is_handed_again_with_a_new_id(service, org, db):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    [first] = _lease(service)
    service.rows("UPDATE memory.captures SET lease_until = clock_timestamp() - interval '1 second'")
    [again] = _lease(service)
    assert again[0] != first[0] and again[1:] == first[1:]
    assert service.value("SELECT memory.fail_capture(%s, 'late')", first[0]) is False
    assert _status(service, org)[0][3] == 0  # the lost lease counted nothing


def test_lease_seconds_setting(service, org, db):
    service.value("SELECT memory.configure('capture_lease_seconds', '60')")
    _index(service, org, uuid.uuid4(), "c1", "m1", "hello", 1)
    _lease(service)
    seconds = service.value(
        "SELECT round(extract(epoch FROM lease_until - clock_timestamp())) FROM memory.captures"
    )
    assert 58 <= seconds <= 60


def test_max_bounds_the_chats_and_max_messages_the_batch(service, org):
    owner = uuid.uuid4()
    for chat in ("a", "b", "c"):
        _index(service, org, owner, chat, f"{chat}1", "one", 1)
    assert len(_lease(service, 2)) == 2
    assert [r[3] for r in _lease(service, 2)] == ["c"]
    other = uuid.uuid4()
    for i in range(1, 16):
        _index(service, org, other, "long", f"m{i:02d}", f"message {i}", i)
    [row] = _lease(service, 10, 4)
    assert _ids(row[4]) == ["m01", "m02", "m03", "m04"]
    assert row[5] == []


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((0, 50), "max must be between 1 and 1000"),
        ((1001, 50), "max must be between 1 and 1000"),
        ((None, 50), "max must be between 1 and 1000"),
        ((10, 0), "max_messages must be between 1 and 1000"),
        ((10, None), "max_messages must be between 1 and 1000"),
    ],
)
def test_pending_captures_bounds(service, args, text):
    assert service.fails(CAPTURES, *args) == Failure("22023", "MEMORY_INVALID", text)


def test_context_is_the_ten_messages_before_the_watermark(service, org, db):
    owner = uuid.uuid4()
    for i in range(1, 15):
        _index(service, org, owner, "c1", f"m{i:02d}", f"message {i}", i)
    # as if the first 12 were captured
    service.rows(
        "UPDATE memory.captures SET (watermark_at, watermark_id) ="
        " (SELECT created_at, id FROM memory.messages WHERE message_id = 'm12')"
    )
    [row] = _lease(service)
    assert _ids(row[4]) == ["m13", "m14"]
    assert _ids(row[5]) == [f"m{i:02d}" for i in range(3, 13)]
    assert row[5][0] == {
        "id": "m03",
        "role": "user",
        "content": "message 3",
        "created_at": "2025-03-01T09:03:00+00:00",
    }
    assert _status(service, org) == [("c1", owner, 2, 0, "leased", None, None)]


def test_a_chat_with_nothing_after_its_watermark_is_not_offered(service, org, db):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    service.rows(
        "UPDATE memory.captures SET (watermark_at, watermark_id) ="
        " (SELECT created_at, id FROM memory.messages)"
    )
    assert _lease(service) == []
    assert _status(service, org) == [("c1", owner, 0, 0, "captured", None, None)]
    _index(service, org, owner, "c1", "m2", "again", 2)
    assert [_ids(r[4]) for r in _lease(service)] == [["m2"]]


def test_idle_seconds(service, org, db):
    service.value("SELECT memory.configure('capture_idle_seconds', '3600')")
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    assert _lease(service) == []
    assert _status(service, org) == [("c1", owner, 1, 0, "pending", None, None)]
    service.rows("UPDATE memory.captures SET indexed_at = now() - interval '3601 seconds'")
    assert [r[3] for r in _lease(service)] == ["c1"]
    service.rows("UPDATE memory.captures SET lease_until = NULL, indexed_at = now()")
    _index(service, org, owner, "c1", "m2", "a new message restarts the wait", 2)
    assert _lease(service) == []


def test_temporary_chats_are_never_pending(service, org, db):
    owner = uuid.uuid4()
    assert _index(service, org, owner, "incognito", "m1", "secret", 1, temporary=True) is False
    assert db.execute("SELECT count(*) FROM memory.captures").fetchone() == (0,)
    assert _lease(service) == []
    assert _status(service, org) == []


def test_fail_counts_attempts_then_parks_until_retry(service, org):
    service.value("SELECT memory.configure('capture_max_attempts', '2')")
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    _index(service, org, owner, "c2", "m1", "other chat", 1)
    leased = {r[3]: r[0] for r in _lease(service)}
    assert service.value("SELECT memory.fail_capture(%s, 'model timed out')", leased["c1"])
    assert service.value("SELECT memory.fail_capture(%s, 'twice')", leased["c1"]) is False
    assert _status(service, org, "c1") == [("c1", owner, 1, 1, "pending", "model timed out", None)]
    [(again, *_)] = _lease(service)  # released: handed again at once
    assert service.value("SELECT memory.fail_capture(%s, 'unparsable answer')", again)
    assert _status(service, org, "c1") == [("c1", owner, 1, 2, "failed", "unparsable answer", None)]
    assert _lease(service) == []  # parked; c2 is still leased
    _index(service, org, owner, "c1", "m2", "a new message does not unpark it", 2)
    assert _lease(service) == []
    assert service.value("SELECT memory.retry_captures(%s, 'c2')", org) == 0
    assert service.value("SELECT memory.retry_captures(%s)", org) == 1
    assert service.value("SELECT memory.retry_captures(%s)", org) == 0
    assert _status(service, org, "c1") == [("c1", owner, 2, 0, "pending", None, None)]
    assert [_ids(r[4]) for r in _lease(service)] == [["m1", "m2"]]


def test_retry_captures_of_one_chat(service, org):
    service.value("SELECT memory.configure('capture_max_attempts', '1')")
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    _index(service, org, owner, "c2", "m1", "hello", 1)
    for row in _lease(service):
        service.value("SELECT memory.fail_capture(%s, NULL)", row[0])
    assert [r[4] for r in _status(service, org)] == ["failed", "failed"]
    assert service.value("SELECT memory.retry_captures(%s, 'c2')", org) == 1
    assert [(r[0], r[4], r[5]) for r in _status(service, org)] == [
        ("c1", "failed", ""),
        ("c2", "pending", None),
    ]


def test_fail_capture_needs_an_id(service):
    assert service.fails("SELECT memory.fail_capture(NULL, 'x')") == Failure(
        "22023", "MEMORY_INVALID", "a capture id is required"
    )
    assert service.value("SELECT memory.fail_capture(%s, 'x')", uuid.uuid4()) is False


def test_another_organizations_chats_stay_apart(service, org):
    other_org, owner = uuid.uuid4(), uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "ours", 1)
    _index(service, other_org, owner, "c1", "m1", "theirs", 1)
    rows = {r[1]: r[4][0]["content"] for r in _lease(service)}
    assert rows == {org: "ours", other_org: "theirs"}
    assert [r[0] for r in _status(service, org)] == ["c1"]
    assert service.value("SELECT count(*) FROM memory.capture_status(%s)", uuid.uuid4()) == 0
    service.value("SELECT memory.configure('capture_max_attempts', '1')")
    _index(service, org, owner, "c2", "m1", "ours", 2)
    [(lease, *_)] = _lease(service)
    service.value("SELECT memory.fail_capture(%s, 'x')", lease)
    assert service.value("SELECT memory.retry_captures(%s, 'c2')", other_org) == 0
    assert service.value("SELECT memory.retry_captures(%s, 'c2')", org) == 1


def test_two_owners_of_one_chat_id_are_two_captures(service, org):
    ana, bob = uuid.uuid4(), uuid.uuid4()
    _index(service, org, ana, "shared", "m1", "Ana's", 1)
    _index(service, org, bob, "shared", "m1", "Bob's", 2)
    rows = sorted((r[2] == ana, r[4][0]["content"]) for r in _lease(service))
    assert rows == [(False, "Bob's"), (True, "Ana's")]


def test_delete_chat_and_erase_user_drop_the_queue_entry(service, org, db):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    _index(service, org, owner, "c2", "m1", "hello", 1)
    service.value("SELECT memory.delete_chat(%s, 'c1')", org)
    assert [r[0] for r in _status(service, org)] == ["c2"]
    service.value("SELECT memory.erase_user(%s, %s)", org, owner)
    assert db.execute("SELECT count(*) FROM memory.captures").fetchone() == (0,)


def test_capture_settings_are_validated(service):
    for key, value, text in [
        ("capture_idle_seconds", "-1", "an integer between 0 and 31536000"),
        ("capture_lease_seconds", "0", "an integer between 1 and 86400"),
        ("capture_max_attempts", "0.5", "an integer between 1 and 1000"),
        ("capture_refuse_secrets", '"yes"', "a boolean"),
    ]:
        got = service.fails("SELECT memory.configure(%s, %s::jsonb)", key, value)
        assert got == Failure("22023", "MEMORY_INVALID", f"setting {key} must be {text}")
    assert service.value("SELECT memory.setting('capture_refuse_secrets')") is True
    assert service.value("SELECT memory.setting('capture_idle_seconds')") == 0
    assert service.value("SELECT memory.configure('capture_refuse_secrets', 'false')") is False


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM memory.pending_captures()",
        "SELECT * FROM memory.capture_facts('00000000-0000-4000-8000-000000000001', '[]')",
        "SELECT memory.fail_capture('00000000-0000-4000-8000-000000000001', 'x')",
        "SELECT memory.retry_captures(%(org)s)",
        "SELECT * FROM memory.capture_status(%(org)s)",
    ],
)
def test_users_are_refused(member, org, query):
    _, user = member("memory.read", "memory.manage")
    got = user.attempt(query.replace("%(org)s", f"'{org}'"))
    assert got == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this"
    )


APPLY = "SELECT ord, op, id, fact_id, status FROM memory.capture_facts(%s, %s, %s)"


def _live(service, org, owner):
    return service.rows(
        "SELECT content FROM memory.list_facts(%s, %s) ORDER BY created_at, id",
        org,
        {"owner_id": str(owner)},
    )


def test_capture_facts_adds_deduplicates_and_moves_the_watermark(service, org):
    owner = uuid.uuid4()
    known = service.value(
        "SELECT memory.save_fact(%s, 'Lives in Porto', NULL, %s)", org, {"owner_id": str(owner)}
    )
    _index(service, org, owner, "c1", "m1", "I moved to Lisbon, my sister is Ana", 1)
    _index(service, org, owner, "c1", "m2", "Ana is a nurse", 2)
    [(capture_id, *_)] = _lease(service)
    ops = [
        {"op": "add", "content": "Has a sister named Ana"},
        {"op": "add", "content": "  lives in   PORTO "},
        {"op": "add", "content": "has a sister named ana"},
    ]
    rows = service.rows(APPLY, capture_id, ops, "claude-x")
    saved = rows[0][2]
    assert rows == [
        (1, "add", saved, None, "saved"),
        (2, "add", None, known, "duplicate"),
        (3, "add", None, saved, "duplicate"),
    ]
    fact = service.value("SELECT memory.get_fact(%s, %s)", org, saved)
    assert fact["source"] == {
        "chat_id": "c1",
        "message_ids": ["m1", "m2"],
        "capture_id": str(capture_id),
        "model": "claude-x",
    }
    assert fact["ns"] == {"scope": "user", "owner_id": str(owner)}
    [(_, _, pending, attempts, status, _, captured_at)] = _status(service, org)
    assert (pending, attempts, status) == (0, 0, "captured") and captured_at is not None
    assert _lease(service) == []
    # applied once: the same capture again changes nothing
    again = service.fails(APPLY, capture_id, ops, None)
    assert again == Failure(
        "40001",
        "MEMORY_CONFLICT",
        f"capture {capture_id} holds no lease: it was lost or already applied",
    )
    _index(service, org, owner, "c1", "m3", "Ana got married", 3)
    [row] = _lease(service)
    assert _ids(row[4]) == ["m3"] and _ids(row[5]) == ["m1", "m2"]


def test_supersede_forget_and_unknown_facts(service, org):
    owner, stranger = uuid.uuid4(), uuid.uuid4()
    porto = service.value(
        "SELECT memory.save_fact(%s, 'Lives in Porto', NULL, %s)", org, {"owner_id": str(owner)}
    )
    cat = service.value(
        "SELECT memory.save_fact(%s, 'Has a cat', NULL, %s)", org, {"owner_id": str(owner)}
    )
    theirs = service.value(
        "SELECT memory.save_fact(%s, 'Not yours', NULL, %s)", org, {"owner_id": str(stranger)}
    )
    _index(service, org, owner, "c1", "m1", "I moved to Lisbon and the cat is gone", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [
        {"op": "supersede", "fact_id": str(porto), "content": "Lives in Lisbon"},
        {"op": "forget", "fact_id": str(cat)},
        {"op": "forget", "fact_id": str(cat)},
        {"op": "forget", "fact_id": str(theirs)},
        {"op": "supersede", "fact_id": str(uuid.uuid4()), "content": "x"},
    ]
    rows = service.rows(APPLY, capture_id, ops, None)
    lisbon = rows[0][2]
    assert rows == [
        (1, "supersede", lisbon, porto, "superseded"),
        (2, "forget", None, cat, "forgotten"),
        (3, "forget", None, cat, "unknown_fact"),
        (4, "forget", None, theirs, "unknown_fact"),
        (5, "supersede", None, rows[4][3], "unknown_fact"),
    ]
    old = service.value("SELECT memory.get_fact(%s, %s)", org, porto)
    assert old["superseded_by"] == str(lisbon) and old["forgotten_at"]
    assert _live(service, org, owner) == [("Lives in Lisbon",)]
    assert _live(service, org, stranger) == [("Not yours",)]


SECRETS = [
    "My OpenAI key is sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "AWS key AKIAIOSFODNN7EXAMPLE",
    "token ghp_" + "a" * 36,
    "-----BEGIN RSA PRIVATE KEY----- MIIE",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "card 4111 1111 1111 1111",
    "password: hunter2",
]


def test_secrets_are_not_stored_unless_allowed(service, org):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "secrets", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [{"op": "add", "content": s} for s in SECRETS]
    ops.append({"op": "add", "content": "Order 4111 1111 1111 1112 arrived; phone 555 0100"})
    rows = service.rows(APPLY, capture_id, ops, None)
    assert [r[4] for r in rows] == ["secret"] * len(SECRETS) + ["saved"]
    assert all(r[2] is None for r in rows[:-1])
    service.value("SELECT memory.configure('capture_refuse_secrets', 'false')")
    _index(service, org, owner, "c1", "m2", "more", 2)
    [(capture_id, *_)] = _lease(service)
    rows = service.rows(APPLY, capture_id, [{"op": "add", "content": "password: hunter2"}], None)
    assert rows[0][4] == "saved"


def test_embeddings_are_stored_and_checked(service, org):
    service.value("SELECT memory.configure_embeddings(4)")
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    [(capture_id, *_)] = _lease(service)
    bad = [{"op": "add", "content": "ok"}, {"op": "add", "content": "x", "embedding": [1, 2]}]
    assert service.fails(APPLY, capture_id, bad, None).hint == "EMBEDDING_INVALID"
    ops = [
        {"op": "add", "content": "Likes tea", "embedding": [1, 0, 0, 0]},
        {"op": "add", "content": "Enjoys tea", "embedding": [1, 0, 0, 0.01]},
    ]
    rows = service.rows(APPLY, capture_id, ops, None)
    assert [r[4] for r in rows] == ["saved", "duplicate"] and rows[1][3] == rows[0][2]


APPLY_BINARY = (
    "SELECT ord, op, id, fact_id, status FROM memory.capture_facts(%s, %s, %s, %s::real[])"
)


def _array(value) -> str:
    """A PostgreSQL array literal of (nested) lists: '{{1,0},{0,1}}'."""
    return "{" + ",".join(_array(v) if isinstance(v, list) else str(v) for v in value) + "}"


def _embedding_of(service, org, fact_id):
    return service.value(
        "SELECT embedding::real[] FROM memory.facts WHERE organization_id = %s AND id = %s",
        org,
        fact_id,
    )


def test_embeddings_bound_beside_the_operations_go_with_their_new_facts(service, org):
    # One row per add and supersede, in order; forgets take none; a secret's row is
    # checked but nothing stored; dedupe compares the rows as save_facts does.
    service.value("SELECT memory.configure_embeddings(4)")
    owner = uuid.uuid4()
    ns = {"owner_id": str(owner)}
    porto = service.value("SELECT memory.save_fact(%s, 'Lives in Porto', NULL, %s)", org, ns)
    cat = service.value("SELECT memory.save_fact(%s, 'Has a cat', NULL, %s)", org, ns)
    _index(service, org, owner, "c1", "m1", "I moved to Lisbon and the cat is gone", 1)
    [(capture_id, *_)] = _lease(service)
    ops = [
        {"op": "add", "content": "Likes tea"},
        {"op": "forget", "fact_id": str(cat)},
        {"op": "supersede", "fact_id": str(porto), "content": "Lives in Lisbon"},
        {"op": "add", "content": "password: hunter2"},
        {"op": "add", "content": "Enjoys tea"},
        {"op": "add", "content": "Works in Braga"},
    ]
    rows = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0.01], [0, 0, 0, 1]]
    got = service.rows(APPLY_BINARY, capture_id, ops, None, _array(rows))
    tea, lisbon, braga = got[0][2], got[2][2], got[5][2]
    assert got == [
        (1, "add", tea, None, "saved"),
        (2, "forget", None, cat, "forgotten"),
        (3, "supersede", lisbon, porto, "superseded"),
        (4, "add", None, None, "secret"),
        (5, "add", None, tea, "duplicate"),
        (6, "add", braga, None, "saved"),
    ]
    assert _embedding_of(service, org, tea) == [1, 0, 0, 0]
    assert _embedding_of(service, org, lisbon) == [0, 1, 0, 0]
    assert _embedding_of(service, org, braga) == [0, 0, 0, 1]
    live = sorted(_live(service, org, owner))
    assert live == [("Likes tea",), ("Lives in Lisbon",), ("Works in Braga",)]


@pytest.mark.parametrize(
    ("ops", "rows", "failure"),
    [
        (
            [{"op": "add", "content": "a"}, {"op": "add", "content": "b"}],
            [[1, 0, 0, 0]],
            Failure(
                "22023",
                "EMBEDDING_INVALID",
                "embeddings must have one row per new fact: 1 rows for 2 new facts",
            ),
        ),
        (
            [{"op": "add", "content": "a"}],
            [1, 0, 0, 0],
            Failure(
                "22023",
                "EMBEDDING_INVALID",
                "embeddings must be a two-dimensional array, one row per new fact",
            ),
        ),
        (
            [{"op": "add", "content": "a"}],
            [[1, 0, 0]],
            Failure("22023", "EMBEDDING_INVALID", "embedding has 3 dimensions, expected 4"),
        ),
        (
            [{"op": "add", "content": "a"}, {"op": "add", "content": "b"}],
            [[1, 0, 0, 0], [0, 1, 0, "NaN"]],
            Failure(
                "22023", "EMBEDDING_INVALID", "embedding elements must be finite float4 numbers"
            ),
        ),
        (
            [{"op": "add", "content": "a", "embedding": [1, 0, 0, 0]}],
            [[1, 0, 0, 0]],
            Failure(
                "22023",
                "MEMORY_INVALID",
                'operation 1 must not carry an "embedding" when embeddings are given',
            ),
        ),
    ],
)
def test_bad_embeddings_beside_the_operations_apply_nothing(service, org, ops, rows, failure):
    service.value("SELECT memory.configure_embeddings(4)")
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    [(capture_id, *_)] = _lease(service)
    assert service.fails(APPLY_BINARY, capture_id, ops, None, _array(rows)) == failure
    assert _live(service, org, owner) == []
    assert _status(service, org)[0][4] == "leased"


@pytest.mark.parametrize(
    ("ops", "text"),
    [
        ({"op": "add"}, "operations must be a JSON array of at most 1000 operations"),
        ([{"op": "merge"}], 'operation 1 must be an object with "op" add, supersede or forget'),
        (
            [{"op": "add", "content": "a"}, "add"],
            'operation 2 must be an object with "op" add, supersede or forget',
        ),
        ([{"op": "add", "content": 3}], 'operation 1 needs a "content" string'),
        ([{"op": "add", "content": "  "}], "a fact needs non-empty content"),
        ([{"op": "forget", "fact_id": "nope"}], 'operation 1 needs a "fact_id" uuid'),
        ([{"op": "supersede", "content": "a"}], 'operation 1 needs a "fact_id" uuid'),
    ],
)
def test_malformed_operations_apply_nothing(service, org, ops, text):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    [(capture_id, *_)] = _lease(service)
    assert service.fails(APPLY, capture_id, ops, None) == Failure("22023", "MEMORY_INVALID", text)
    assert _live(service, org, owner) == []
    assert _status(service, org)[0][4] == "leased"  # the lease stays: fail_capture gives it back


def test_a_lost_lease_is_a_conflict(service, org):
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m1", "hello", 1)
    [(first, *_)] = _lease(service)
    service.rows("UPDATE memory.captures SET lease_until = clock_timestamp() - interval '1 second'")
    ops = [{"op": "add", "content": "Says hello"}]
    assert service.fails(APPLY, first, ops, None).hint == "MEMORY_CONFLICT"  # expired
    [(second, *_)] = _lease(service)
    assert service.fails(APPLY, first, ops, None).hint == "MEMORY_CONFLICT"  # handed to another
    assert service.fails(APPLY, None, ops, None) == Failure(
        "22023", "MEMORY_INVALID", "a capture id is required"
    )
    assert [r[4] for r in service.rows(APPLY, second, ops, None)] == ["saved"]
    assert _live(service, org, owner) == [("Says hello",)]


def test_only_the_leased_messages_pass_the_watermark(service, org):
    owner = uuid.uuid4()
    for i in range(1, 6):
        _index(service, org, owner, "c1", f"m{i}", f"message {i}", i)
    [(capture_id, *_)] = _lease(service, 10, 3)
    _index(service, org, owner, "c1", "m6", "arrives during the capture", 6)
    [(_, _, fact, _, _)] = service.rows(
        APPLY, capture_id, [{"op": "add", "content": "A fact"}], None
    )
    source = service.value("SELECT memory.get_fact(%s, %s)", org, fact)["source"]
    assert source["message_ids"] == ["m1", "m2", "m3"]
    assert _status(service, org)[0][2] == 3
    [row] = _lease(service)
    assert _ids(row[4]) == ["m4", "m5", "m6"]
    assert service.rows(APPLY, row[0], [], None) == []
    assert _status(service, org)[0][2:5] == (0, 0, "captured")


MESSAGES_READ = (
    "SELECT idx_tup_fetch + seq_tup_read FROM pg_stat_xact_user_tables"
    " WHERE relid = 'memory.messages'::regclass"
)


def test_a_long_chat_is_leased_and_applied_reading_only_its_new_messages(service, org, dsn):
    """The lease, its context and the apply find a chat's messages after its watermark
    through an index in message order: a chat of 2,000 captured messages costs them
    what a new chat costs, not a read of its whole history."""
    owner = uuid.uuid4()
    _index(service, org, owner, "c1", "m0000", "the first message", 0)
    service.rows(
        "INSERT INTO memory.messages (organization_id, namespace_id, chat_id, message_id, role,"
        " content, created_at)"
        " SELECT m.organization_id, m.namespace_id, m.chat_id, format('m%%s', lpad(i::text, 4, '0')),"
        " 'user', format('message %%s', i), m.created_at + make_interval(secs => i)"
        " FROM memory.messages m, generate_series(1, 1999) i WHERE m.message_id = 'm0000'"
    )
    service.rows(
        "UPDATE memory.captures SET (watermark_at, watermark_id) ="
        " (SELECT created_at, id FROM memory.messages WHERE message_id = 'm1999')"
    )
    for i in range(5):
        _index(service, org, owner, "c1", f"new{i}", f"new message {i}", 50 + i)
    with psycopg.connect(dsn) as conn:
        [(capture_id, messages, context)] = conn.execute(
            "SELECT capture_id, messages, context FROM memory.pending_captures(10, 50)"
        ).fetchall()
        lease_read = conn.execute(MESSAGES_READ).fetchone()[0]
    assert _ids(messages) == [f"new{i}" for i in range(5)]
    assert _ids(context) == [f"m{i:04d}" for i in range(1990, 2000)]
    with psycopg.connect(dsn) as conn:
        [(status,)] = conn.execute(
            "SELECT status FROM memory.capture_facts(%s, %s::jsonb)",
            (capture_id, '[{"op": "add", "content": "Wrote 2,005 messages"}]'),
        ).fetchall()
        apply_read = conn.execute(MESSAGES_READ).fetchone()[0]
    assert status == "saved"
    assert lease_read <= 40, f"the lease read {lease_read} messages"
    assert apply_read <= 20, f"the apply read {apply_read} messages"
    assert _status(service, org)[0][2:5] == (0, 0, "captured")
