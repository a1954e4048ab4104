"""recall_context: core memory, facts and earlier messages before a turn, and replays."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.support import Failure, user_claims

CONTEXT = "SELECT id, kind, content FROM memory.recall_context(%s, %s, %s::real[], %s, %s)"
NOTES = {"command": "create", "path": "/memories/notes.md", "file_text": "Prefers short answers\n"}
CORE = '<memory_file path="/memories/notes.md" scope="user">\nPrefers short answers\n</memory_file>'
QUERY = "where does my sister Ana live"
Q = [1.0, 0.0, 0.0, 0.0]  # the query's embedding


def _context(who, org, query=QUERY, embedding=Q, ns=None, **options):
    return who.rows(CONTEXT, org, query, embedding, ns or {}, options)


def _fact(who, org, content, embedding, ns=None):
    return who.value(
        "SELECT memory.save_fact(%s, %s, %s::real[], %s)", org, content, embedding, ns or {}
    )


def _message(service, org, owner, chat, mid, content, embedding):
    message = {
        "id": mid,
        "chat_id": chat,
        "owner_id": str(owner),
        "role": "user",
        "content": content,
    }
    service.value("SELECT memory.index_message(%s, %s, %s::real[])", org, message, embedding)
    return service.value(
        "SELECT id FROM memory.messages WHERE organization_id = %s AND chat_id = %s AND message_id = %s",
        org,
        chat,
        mid,
    )


@pytest.fixture
def alice(service, member, org):
    """A user with a file, two facts and messages in two chats; vectors ranked against Q."""
    service.value("SELECT memory.configure_embeddings(4)")
    user_id, alice = member()
    alice.run(org, NOTES)
    alice.ids = {  # type: ignore[attr-defined]
        "porto": _fact(alice, org, "Sister Ana lives in Porto", [1.0, 0.0, 0.0, 0.0]),
        "tea": _fact(alice, org, "Likes green tea", [0.6, 0.8, 0.0, 0.0]),
        "m1": _message(
            service, org, user_id, "chat-1", "m1", "Ana moved to Porto", [0.9, 0.1, 0.0, 0.0]
        ),
        "m2": _message(
            service, org, user_id, "chat-2", "m2", "Book the flight", [0.1, 0.9, 0.0, 0.0]
        ),
    }
    alice.user_id = user_id  # type: ignore[attr-defined]
    return alice


def test_rows_in_order_and_the_count_options(alice, org):
    ids = alice.ids
    assert _context(alice, org) == [
        ("core", "core", CORE),
        (f"fact:{ids['porto']}", "fact", "Sister Ana lives in Porto"),
        (f"fact:{ids['tea']}", "fact", "Likes green tea"),
        (f"message:{ids['m1']}", "message", "Ana moved to Porto"),
        (f"message:{ids['m2']}", "message", "Book the flight"),
    ]
    assert alice.value("SELECT memory.render(%s)", org) == CORE
    assert _context(alice, org, facts=1, messages=1, exclude_chat="chat-1") == [
        ("core", "core", CORE),
        (f"fact:{ids['porto']}", "fact", "Sister Ana lives in Porto"),
        (f"message:{ids['m2']}", "message", "Book the flight"),
    ]
    # Text only, nothing but the messages; search options reach both searches.
    assert _context(alice, org, "flight", None, facts=0, vector_weight=0) == [
        ("core", "core", CORE),
        (f"message:{ids['m2']}", "message", "Book the flight"),
    ]
    # Another namespace of hers: no files there, so no core row; its facts only.
    project = {"scope": "project", "project_id": "p1"}
    launch = _fact(alice, org, "The launch is in May", [0.0, 0.0, 1.0, 0.0], project)
    assert _context(alice, org, "launch", ns=project, messages=0) == [
        (f"fact:{launch}", "fact", "The launch is in May")
    ]
    alice.run(org, {"command": "delete", "path": "/memories/notes.md"})
    assert _context(alice, org, facts=0, messages=0) == []


def test_options_are_checked(alice, org, service):
    bad = [
        ({"facts": -1}, "option facts must be between 0 and 1000"),
        ({"facts": 1001}, "option facts must be between 0 and 1000"),
        ({"facts": 1.5}, "option facts must be between 0 and 1000"),
        ({"facts": "3"}, "option facts must be between 0 and 1000"),
        ({"messages": 101}, "option messages must be between 0 and 100"),
        ({"messages": None}, "option messages must be between 0 and 100"),
        ({"exclude_chat": 5}, "option exclude_chat must be a string"),
        (
            {"operation_id": ""},
            "option operation_id must be a non-empty string of at most 1024 bytes",
        ),
        (
            {"operation_id": "é" * 513},
            "option operation_id must be a non-empty string of at most 1024 bytes",
        ),
        (
            {"operation_id": 7},
            "option operation_id must be a non-empty string of at most 1024 bytes",
        ),
        ({"k": 3}, "unknown search option 'k'"),
        ({"rrf_k": -1}, "search option rrf_k must be 0 or a number between 0.000001 and 1000000"),
    ]
    for options, text in bad:
        assert alice.fails(CONTEXT, org, QUERY, Q, {}, options) == Failure(
            "22023", "MEMORY_INVALID", text
        ), options
    assert alice.fails(CONTEXT, org, QUERY, Q, {}, []) == Failure(
        "22023", "MEMORY_INVALID", "options must be a JSON object"
    )
    assert alice.fails(CONTEXT, org, QUERY, Q, [{}], {}) == Failure(
        "22023", "MEMORY_INVALID", "namespace must be a JSON object, got [{}]"
    )
    assert len(_context(alice, org, operation_id="é" * 512)) == 5  # 1024 bytes
    assert db_replays(service) == [(org, alice.user_id, False, "é" * 512)]
    for value in ("0", "31536001", '"60"'):
        assert service.fails(
            "SELECT memory.configure('recall_replay_seconds', %s::jsonb)", value
        ) == Failure(
            "22023",
            "MEMORY_INVALID",
            "setting recall_replay_seconds must be an integer between 1 and 31536000",
        )
    assert service.value("SELECT memory.setting('recall_replay_seconds')") == 604800


def db_replays(service):
    """(organization, owner of the replay's namespace, asked by the service, operation id)
    of every replay, sorted."""
    rows = service.rows(
        "SELECT r.organization_id, n.owner_id, r.service, r.operation_id FROM memory.recall_replays r"
        " JOIN memory.namespaces n ON n.organization_id = r.organization_id AND n.id = r.namespace_id"
    )
    return sorted(rows, key=str)


def test_the_service_reads_for_an_owner_without_messages(alice, org, service):
    owner = {"owner_id": str(alice.user_id)}
    assert _context(service, org, ns=owner, facts=1, messages=0) == _context(
        alice, org, facts=1, messages=0
    )
    assert service.fails(CONTEXT, org, QUERY, Q, owner, {}) == Failure(
        "22023",
        "MEMORY_INVALID",
        "the service has no messages of its own: call recall_context with the user's claims,"
        " or pass option messages 0",
    )
    org_ns = {"scope": "organization"}
    assert _context(service, org, ns=org_ns, messages=0, operation_id="t") == []
    # Kept under the organization's namespace (it has no owner).
    assert db_replays(service) == [(org, None, True, "t")]


def test_a_replay_is_the_first_answer_for_the_same_caller_only(alice, org, service, member):
    ids = alice.ids
    first = _context(alice, org, operation_id="turn-1")
    # Memory changes, the query changes: the replay does not.
    alice.run(
        org,
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "short",
            "new_str": "long",
        },
    )
    alice.rows("SELECT memory.forget(%s, %s)", org, ids["porto"])
    newer = _fact(alice, org, "Sister Ana moved to Lisbon", [1.0, 0.0, 0.0, 0.0])
    assert _context(alice, org, "tea", None, operation_id="turn-1") == first
    assert _context(alice, org, "tea", None, operation_id="turn-1", facts=0) == first
    fresh = _context(alice, org, operation_id="turn-2")
    assert fresh != first and fresh[1] == (f"fact:{newer}", "fact", "Sister Ana moved to Lisbon")
    assert _context(alice, org, operation_id="turn-2") == fresh
    # Others with the same operation id get answers of their own, never hers.
    bob_id, bob = member("memory.read", "memory.manage")  # an org admin
    bob_fact = _fact(bob, org, "Bob's sister Ana lives in Rome", [1.0, 0.0, 0.0, 0.0])
    assert _context(bob, org, operation_id="turn-1") == [
        (f"fact:{bob_fact}", "fact", "Bob's sister Ana lives in Rome")
    ]
    other_org = uuid.uuid4()
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", other_org, alice.user_id)
    assert _context(alice, other_org, operation_id="turn-1") == []
    owner = {"owner_id": str(alice.user_id)}
    as_service = _context(service, org, ns=owner, messages=0, operation_id="turn-1")
    assert as_service[0] == ("core", "core", CORE.replace("short", "long"))
    assert db_replays(service) == sorted(
        [
            (org, alice.user_id, False, "turn-1"),
            (org, alice.user_id, False, "turn-2"),
            (org, alice.user_id, True, "turn-1"),
            (org, bob_id, False, "turn-1"),
            (other_org, alice.user_id, False, "turn-1"),
        ],
        key=str,
    )
    # Erasing the user erases her replays (in this organization) with her namespaces.
    service.value("SELECT memory.erase_user(%s, %s)", org, alice.user_id)
    assert db_replays(service) == sorted(
        [(org, bob_id, False, "turn-1"), (other_org, alice.user_id, False, "turn-1")], key=str
    )


def test_an_expired_replay_is_answered_afresh(alice, org, service, db):
    service.rows("SELECT memory.configure('recall_replay_seconds', '60')")
    first = _context(alice, org, operation_id="turn-1")
    _context(alice, org, operation_id="turn-0")
    alice.run(org, {"command": "delete", "path": "/memories/notes.md"})
    assert _context(alice, org, operation_id="turn-1") == first  # still live
    service.rows("UPDATE memory.recall_replays SET created_at = now() - interval '61 seconds'")
    again = _context(alice, org, operation_id="turn-1")
    assert again == first[1:]  # no core row any more
    assert _context(alice, org, operation_id="turn-1") == again
    # Storing a replay dropped the expired ones of her namespace.
    assert db_replays(service) == [(org, alice.user_id, False, "turn-1")]


@pytest.mark.parametrize("operation", [None, "turn-1"])
def test_nobody_else_sees_her_memory(alice, org, service, member, as_, operation):
    """Another user, an org admin, a user of another organization: none of her core, facts
    or messages, with queries that match them, with or without her operation id."""
    options = {} if operation is None else {"operation_id": operation}
    _context(alice, org, **options)
    _, dave = member()
    _, admin = member("memory.read", "memory.manage")
    other_org = uuid.uuid4()
    _, carol = member(organization=other_org)
    for who, where in ((dave, org), (admin, org), (carol, other_org)):
        for query in (QUERY, "Porto tea flight Ana"):
            assert _context(who, where, query, **options) == []
    assert carol.fails(CONTEXT, org, QUERY, Q, {}, options) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )
    assert admin.fails(
        CONTEXT, org, QUERY, Q, {"owner_id": str(alice.user_id)}, options
    ) == Failure("42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id")
    # Losing the read permission loses the replay too.
    service.rows("SELECT memory.revoke(%s, %s, 'memory.read')", org, alice.user_id)
    assert alice.fails(CONTEXT, org, QUERY, Q, {}, options) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )


def test_concurrent_first_calls_give_one_answer(alice, org, service, dsn):
    """A second call that stored nothing because the first one's insert won returns the
    first one's answer, not the one it computed itself."""
    claims = json.dumps(user_claims(alice.user_id))
    params = (org, QUERY, Q, Jsonb({}), Jsonb({"operation_id": "turn-1"}))
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        first.execute("SELECT set_config('request.jwt.claims', %s, true)", (claims,))
        more = {"command": "create", "path": "/memories/more.md", "file_text": "Seen first\n"}
        first.execute("SELECT memory.run(%s, %s)", (org, Jsonb(more)))
        answer = first.execute(CONTEXT, params).fetchall()  # not committed yet

        def call() -> list[tuple[str, str, str]]:
            second.execute("SELECT set_config('request.jwt.claims', %s, true)", (claims,))
            rows = second.execute(CONTEXT, params).fetchall()
            second.commit()
            return rows

        with ThreadPoolExecutor(max_workers=1) as pool:
            later = pool.submit(call)
            deadline = time.monotonic() + 60  # guards against a hang only
            while (
                service.value(
                    "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = %s",
                    second.info.backend_pid,
                )
                is not True
            ):
                assert time.monotonic() < deadline, "the second call never waited for the first"
                time.sleep(0.01)
            first.commit()
            assert later.result(timeout=60) == answer
    assert "Seen first" in answer[0][2]
