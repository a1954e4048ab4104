"""Erasure and portability: erase_user removes everything of one
user in one organization and nothing else; export → import round-trips a
namespace byte for byte, into a fresh database too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import SERVICE_LOGIN, USER_LOGIN, ServerInfo
from tests.support import SERVICE, Failure, Principal, not_the_service, user_claims

ORGANIZATION = {"scope": "organization"}
UNICODE_PATH = "/memories/日本語/ünïcödé notes.md"
UNICODE_TEXT = 'Grüße aus Köln 🌍\n東京は晴れ\nemoji: 👩‍💻 "quotes" & <tags>\n'
TABLES = ("namespaces", "files", "facts", "messages", "permissions", "settings", "documents")

EXPORT = "SELECT memory.export(%s, %s)::text"
IMPORT = "SELECT memory.import(%s, %s::jsonb, %s)"

ONLY_SERVICE = Failure("42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this")
NO_OWNER_ID = Failure(
    "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id"
)
NOT_AN_EXPORT = Failure(
    "22023", "MEMORY_INVALID", 'not a pgmemory export (format "pgmemory", version 1)'
)


def _create(path: str, text: str) -> dict[str, str]:
    return {"command": "create", "path": path, "file_text": text}


def _replace(path: str, old: str, new: str) -> dict[str, str]:
    return {"command": "str_replace", "path": path, "old_str": old, "new_str": new}


def _exists(constraint: str) -> Failure:
    return Failure(
        "23505",
        "MEMORY_EXISTS",
        "an item of this export already exists: "
        f'duplicate key value violates unique constraint "{constraint}"',
    )


def _rows(db: psycopg.Connection, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows read as the superuser, straight from the tables."""
    with db.cursor() as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    db.commit()
    return rows


def _tables(db: psycopg.Connection) -> dict[str, list[str]]:
    """Every row of every extension table, as text, sorted."""
    return {
        table: [
            row[0]
            for row in _rows(db, f"SELECT to_jsonb(t)::text FROM memory.{table} t ORDER BY 1")
        ]
        for table in TABLES
    }


# ---------------------------------------------------------------- erase_user


def _fill_user(
    service: Principal, org: uuid.UUID, user: uuid.UUID, tag: str, embedding_axis: int
) -> None:
    """Files in four namespaces, facts (embedded, pending, forgotten), messages in two chats."""
    owner = str(user)
    mine = {"owner_id": owner}
    agent = {"scope": "agent", "agent_id": "planner", "owner_id": owner}
    chat = {"scope": "chat", "chat_id": "chat-1", "owner_id": owner}
    project = {"scope": "project", "project_id": "projet été", "owner_id": owner}
    service.run(org, _create("/memories/notes.md", f"notes of {tag}\n"), mine)
    service.run(org, _replace("/memories/notes.md", "notes", "edited notes"), mine)
    service.run(org, _create(UNICODE_PATH, UNICODE_TEXT), mine)
    service.run(org, _create("/memories/style.md", f"terse ({tag})\n"), agent)
    service.run(org, _create("/memories/summary.md", f"chat of {tag}\n"), chat)
    service.run(org, _create("/memories/plan.md", f"plan of {tag}\n"), project)

    axis = [0.0] * 4
    axis[embedding_axis] = 1.0
    save = "SELECT memory.save_fact(%s, %s, %s::real[], %s)"
    service.value(save, org, f"{tag} lives in Lisbon", axis, mine)
    service.value(save, org, f"{tag} likes tea", None, mine)
    forgotten = service.value(save, org, f"{tag} used to live in Porto", None, mine)
    service.rows("SELECT memory.forget(%s, %s)", org, forgotten)
    service.value(save, org, f"{tag} plans in sprints", axis, agent)

    index = "SELECT memory.index_message(%s, %s, %s::real[])"
    for chat_id, message_id, role, vector in (
        ("chat-1", f"{tag}-1", "user", axis),
        ("chat-1", f"{tag}-2", "assistant", None),
        ("chat-2", f"{tag}-3", "user", None),
    ):
        message = {
            "id": message_id,
            "chat_id": chat_id,
            "owner_id": owner,
            "role": role,
            "content": f"{tag} says {message_id}",
        }
        assert service.value(index, org, message, vector) is True


def test_erase_user_removes_everything_of_the_user_and_nothing_else(
    dims4: Principal, org: uuid.UUID, db: psycopg.Connection, member, as_
) -> None:
    service = dims4
    other_org = uuid.uuid4()
    alice, bob = uuid.uuid4(), uuid.uuid4()
    for organization, user, permission in (
        (org, alice, "memory.read"),
        (org, alice, "memory.manage"),
        (org, bob, "memory.read"),
        (other_org, alice, "memory.read"),
    ):
        service.rows("SELECT memory.grant(%s, %s, %s)", organization, user, permission)
    _fill_user(service, org, alice, "alice", 0)
    _fill_user(service, org, bob, "bob", 1)  # same chats, other messages
    _fill_user(service, other_org, alice, "alice elsewhere", 2)
    service.run(org, _create("/memories/policy.md", "Answer in English.\n"), ORGANIZATION)
    service.run(other_org, _create("/memories/policy.md", "Réponds en français.\n"), ORGANIZATION)
    service.value("SELECT memory.document_write('scope', 'doc', 'text', NULL)")
    alice_herself = as_(user_claims(alice))
    _, admin = member("memory.read", "memory.manage")

    alices = [
        row[0]
        for row in _rows(
            db,
            "SELECT id FROM memory.namespaces WHERE organization_id = %s AND owner_id = %s",
            org,
            alice,
        )
    ]
    assert len(alices) == 4

    def alice_in_org(table: str) -> str:
        """A condition on `t` that is true for rows of alice in org."""
        if table == "namespaces":
            return f"t.organization_id = '{org}' AND t.owner_id = '{alice}'"
        if table == "permissions":
            return f"t.organization_id = '{org}' AND t.user_id = '{alice}'"
        if table in ("files", "facts", "messages"):
            ids = ",".join(f"'{i}'" for i in alices)
            return f"t.organization_id = '{org}' AND t.namespace_id IN ({ids})"
        return "false"

    def split() -> tuple[dict[str, int], dict[str, list[str]]]:
        """How many rows of alice in org per table, and every other row as text."""
        mine, others = {}, {}
        for table in TABLES:
            rows = _rows(
                db,
                f"SELECT to_jsonb(t)::text, {alice_in_org(table)} FROM memory.{table} t ORDER BY 1",
            )
            mine[table] = sum(1 for _, hers in rows if hers)
            others[table] = [text for text, hers in rows if not hers]
        return mine, others

    mine_before, others_before = split()
    assert mine_before == {
        "namespaces": 4,
        "files": 5,
        "facts": 4,
        "messages": 3,
        "permissions": 2,
        "settings": 0,
        "documents": 0,
    }
    # Everyone else has rows in every kind of table, so "untouched" means something.
    assert {table: len(rows) > 0 for table, rows in others_before.items()} == {
        "namespaces": True,
        "files": True,
        "facts": True,
        "messages": True,
        "permissions": True,
        "settings": False,
        "documents": True,
    }

    # Only the service may erase, not even the user herself.
    assert alice_herself.fails("SELECT memory.erase_user(%s, %s)", org, alice) == ONLY_SERVICE
    assert admin.fails("SELECT memory.erase_user(%s, %s)", org, bob) == ONLY_SERVICE
    assert split() == (mine_before, others_before)

    assert service.value("SELECT memory.erase_user(%s, %s)", org, alice) == {
        "files": 5,
        "facts": 4,
        "messages": 3,
        "namespaces": 4,
        "permissions": 2,
    }
    mine_after, others_after = split()
    assert mine_after == dict.fromkeys(TABLES, 0)
    for table in TABLES:
        assert others_after[table] == others_before[table], table
    # Nothing of alice in org is found by any other way either.
    assert _rows(
        db,
        "SELECT (SELECT count(*) FROM memory.messages WHERE organization_id = %s AND content LIKE 'alice %%')"
        " + (SELECT count(*) FROM memory.facts WHERE organization_id = %s AND content LIKE 'alice %%')"
        " + (SELECT count(*) FROM memory.files WHERE organization_id = %s AND content LIKE '%%alice%%')",
        org,
        org,
        org,
    ) == [(0,)]

    # Erasing again, or erasing someone unknown, finds nothing.
    nothing = {"files": 0, "facts": 0, "messages": 0, "namespaces": 0, "permissions": 0}
    assert service.value("SELECT memory.erase_user(%s, %s)", org, alice) == nothing
    assert service.value("SELECT memory.erase_user(%s, %s)", org, uuid.uuid4()) == nothing
    assert service.fails("SELECT memory.erase_user(%s, %s)", org, None) == Failure(
        "22023", "MEMORY_INVALID", "erase_user needs an organization and a user"
    )
    assert split() == (mine_after, others_after)


# ---------------------------------------------------------------- export / import


def _fill_namespace(service: Principal, org: uuid.UUID, owner: uuid.UUID) -> dict[str, Any]:
    """A user namespace with every kind of memory; returns a few ids."""
    ns = {"owner_id": str(owner)}
    service.run(org, _create("/memories/notes/todo.md", "- buy milk\n- call Bob\n"), ns)
    service.run(org, _replace("/memories/notes/todo.md", "milk", "oat milk"), ns)
    service.run(
        org,
        {
            "command": "insert",
            "path": "/memories/notes/todo.md",
            "insert_line": 0,
            "insert_text": "# Todo",
        },
        ns,
    )
    service.run(org, _create(UNICODE_PATH, UNICODE_TEXT), ns)
    service.run(org, _create("/memories/empty.md", ""), ns)

    save = "SELECT memory.save_fact(%s, %s, %s::real[], %s, %s)"
    precise = service.value(
        save,
        org,
        "Prefers green tea 🍵",
        [0.1, -0.2, 0.30000001, 1e-7],
        ns,
        {"chat_id": "chat-1", "message_id": "m-1"},
    )
    old = service.value(save, org, "Lives in Porto", [0, 1, 0, 0], ns, None)
    new = service.value(save, org, "Lives in Lisbon", [0, 0, 1, 0], ns, None)
    service.rows("SELECT memory.forget(%s, %s, %s)", org, old, new)
    pending = service.value(save, org, "Has a cat named Miso", None, ns, None)
    service.value(save, org, "Works on Saturdays", None, ns, None)
    edited = service.value(save, org, "Speaks German", [0, 0, 0, 1], ns, None)
    assert (
        service.value("SELECT memory.edit_fact(%s, %s, 'Speaks German and Dutch')", org, edited)
        == 2
    )
    hashed = service.value("SELECT content_hash FROM memory.facts WHERE id = %s", pending)
    assert (
        service.value(
            "SELECT memory.set_memory_embeddings(%s, %s, %s, 'model-x')",
            [pending],
            [hashed],
            [[0.5, 0.5, 0.5, -0.5]],
        )
        == 1
    )

    index = "SELECT memory.index_message(%s, %s, %s::real[])"
    for chat_id, message_id, role, content, created_at, vector in (
        (
            "chat-1",
            "m-1",
            "user",
            "I prefer green tea",
            "2025-01-02T03:04:05.123456Z",
            [1, 0, 0, 0],
        ),
        ("chat-1", "m-2", "assistant", "Noted: green tea ✓", "2025-01-02T03:04:06Z", None),
        ("chat-2", "m-1", "user", "Moving to Lisbon", None, [0.25, 0.5, 0.75, 1e-3]),
        ("chat-2", "m-2", "user", "Pending message", None, None),
    ):
        message = {"id": message_id, "chat_id": chat_id, "owner_id": str(owner), "role": role}
        message["content"] = content
        if created_at:
            message["created_at"] = created_at
        assert service.value(index, org, message, vector) is True
    message_id, message_hash = service.rows(
        "SELECT id, content_hash FROM memory.messages WHERE organization_id = %s "
        "AND chat_id = 'chat-1' AND message_id = 'm-2'",
        org,
    )[0]
    assert (
        service.value(
            "SELECT memory.set_memory_embeddings(%s, %s, %s, 'model-y')",
            [message_id],
            [message_hash],
            [[0, 0, 1, 0]],
        )
        == 1
    )

    # Other memories of the same user and of another user: not part of the export.
    service.run(
        org, _create("/memories/agent.md", "agent\n"), {**ns, "scope": "agent", "agent_id": "a"}
    )
    service.run(org, _create("/memories/other.md", "other\n"), {"owner_id": str(uuid.uuid4())})
    return {"old": old, "new": new, "precise": precise, "pending": pending, "edited": edited}


def test_export_lists_every_memory_of_the_namespace(dims4: Principal, org: uuid.UUID) -> None:
    owner = uuid.uuid4()
    ids = _fill_namespace(dims4, org, owner)
    data = json.loads(dims4.value(EXPORT, org, {"owner_id": str(owner)}))
    assert set(data) == {"format", "version", "namespace", "files", "facts", "messages"}
    assert (data["format"], data["version"], data["namespace"]) == (
        "pgmemory",
        1,
        {"scope": "user"},
    )
    assert [(f["path"], f["version"], f["content"]) for f in data["files"]] == [
        ("/memories/empty.md", 1, ""),
        ("/memories/notes/todo.md", 3, "# Todo\n- buy oat milk\n- call Bob\n"),
        (UNICODE_PATH, 1, UNICODE_TEXT),
    ]
    facts = {uuid.UUID(f["id"]): f for f in data["facts"]}
    assert len(data["facts"]) == len(facts) == 6
    assert facts[ids["old"]]["forgotten_at"] is not None
    assert facts[ids["old"]]["superseded_by"] == str(ids["new"])
    assert facts[ids["new"]]["forgotten_at"] is None
    assert facts[ids["precise"]]["embedding"] == [0.1, -0.2, 0.3, 1e-7]
    assert facts[ids["precise"]]["source"] == {"chat_id": "chat-1", "message_id": "m-1"}
    assert (facts[ids["pending"]]["embedding"], facts[ids["pending"]]["embedding_model"]) == (
        [0.5, 0.5, 0.5, -0.5],
        "model-x",
    )
    assert (facts[ids["edited"]]["version"], facts[ids["edited"]]["embedding"]) == (2, None)
    assert [
        (m["chat_id"], m["id"], m["role"], m["embedding"], m["embedding_model"])
        for m in data["messages"]
    ] == [
        ("chat-1", "m-1", "user", [1, 0, 0, 0], None),
        ("chat-1", "m-2", "assistant", [0, 0, 1, 0], "model-y"),
        ("chat-2", "m-1", "user", [0.25, 0.5, 0.75, 0.001], None),
        ("chat-2", "m-2", "user", None, None),
    ]
    assert data["messages"][0]["created_at"] == "2025-01-02T03:04:05.123456+00:00"

    # A namespace with nothing in it exports empty lists.
    empty = json.loads(dims4.value(EXPORT, org, {"owner_id": str(uuid.uuid4())}))
    assert (empty["files"], empty["facts"], empty["messages"]) == ([], [], [])


@pytest.fixture
def fresh_database(pg_server: ServerInfo) -> Iterator[str]:
    """A new database with the extension and 4-dimension embeddings; dropped afterwards."""
    name = f"import_{uuid.uuid4().hex[:12]}"
    admin_dsn = pg_server.server.dsn("postgres")
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        fresh_dsn = pg_server.server.dsn(name)
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION memory CASCADE")
            conn.execute(f"GRANT USAGE ON SCHEMA memory TO {SERVICE_LOGIN}, {USER_LOGIN}")
            conn.execute("SELECT memory.configure_embeddings(4)")
        yield fresh_dsn
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_export_import_into_a_fresh_database_round_trips_byte_for_byte(
    dims4: Principal, org: uuid.UUID, fresh_database: str, db: psycopg.Connection
) -> None:
    owner = uuid.uuid4()
    ns = {"owner_id": str(owner)}
    _fill_namespace(dims4, org, owner)
    exported = dims4.value(EXPORT, org, ns)
    before = _tables(db)

    elsewhere = Principal(fresh_database, SERVICE)
    try:
        assert elsewhere.value(IMPORT, org, exported, ns) == {"files": 3, "facts": 6, "messages": 4}
        assert elsewhere.value(EXPORT, org, ns) == exported
        # The import is usable: pending items wait for embeddings as before.
        assert sorted(
            elsewhere.rows("SELECT kind, content FROM memory.pending_embeddings(100)")
        ) == [
            ("fact", "Speaks German and Dutch"),
            ("fact", "Works on Saturdays"),
            ("message", "Pending message"),
        ]
        assert (
            elsewhere.value(
                "SELECT memory.read(%s, '/memories/notes/todo.md', %s) -> 'version'", org, ns
            )
            == 3
        )
    finally:
        elsewhere.close()
    assert _tables(db) == before  # exporting changed nothing


def test_user_exports_and_imports_their_own_namespace(
    dims4: Principal, org: uuid.UUID, member, db: psycopg.Connection
) -> None:
    user_id, user = member()
    ns = {"owner_id": str(user_id)}
    _fill_namespace(dims4, org, user_id)
    exported = user.value(EXPORT, org, {})
    assert exported == dims4.value(EXPORT, org, ns)

    # Passing owner_id is for the service only, even one's own.
    assert user.fails(EXPORT, org, ns) == NO_OWNER_ID
    assert user.fails(IMPORT, org, exported, ns) == NO_OWNER_ID
    # Without the read permission: nothing.
    _, stranger = member(organization=uuid.uuid4())
    assert stranger.fails(EXPORT, org, {}) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )
    assert stranger.fails(IMPORT, org, exported, {}) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )

    # Take it all out, then load it back as the user: the same export again.
    assert dims4.value("SELECT memory.erase_user(%s, %s)", org, user_id) == {
        "files": 4,
        "facts": 6,
        "messages": 4,
        "namespaces": 2,
        "permissions": 1,
    }
    dims4.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user_id)
    assert json.loads(user.value(EXPORT, org, {}))["files"] == []
    # Messages are indexed by the service only: a user's import of them is refused whole.
    assert user.fails(IMPORT, org, exported, {}) == Failure(
        "42501",
        "MEMORY_FORBIDDEN",
        "not permitted: only the service may import messages"
        ' (import as the service with owner_id, or leave "messages" empty)',
    )
    assert json.loads(user.value(EXPORT, org, {}))["facts"] == []
    data = json.loads(exported)
    assert user.value(IMPORT, org, {**data, "messages": []}, {}) == {
        "files": 3,
        "facts": 6,
        "messages": 0,
    }
    # Everything comes back; the facts under new ids, their history links following them.
    again = json.loads(user.value(EXPORT, org, {}))
    new_ids = {old["id"]: new["id"] for old, new in zip(data["facts"], again["facts"], strict=True)}
    assert not set(new_ids) & set(new_ids.values())
    renamed = [
        {
            **fact,
            "id": new_ids[fact["id"]],
            "superseded_by": fact["superseded_by"] and new_ids[fact["superseded_by"]],
        }
        for fact in data["facts"]
    ]
    assert again == {**data, "facts": renamed, "messages": []}


def test_import_refuses_what_the_namespace_already_holds(
    dims4: Principal, org: uuid.UUID, db: psycopg.Connection
) -> None:
    owner = uuid.uuid4()
    ns = {"owner_id": str(owner)}
    _fill_namespace(dims4, org, owner)
    exported = dims4.value(EXPORT, org, ns)
    data = json.loads(exported)
    before = _tables(db)

    assert dims4.fails(IMPORT, org, exported, ns) == _exists("files_pkey")

    def only(**parts: Any) -> str:
        return json.dumps({**data, "files": [], "facts": [], "messages": [], **parts})

    new_file = {
        "path": "/memories/new.md",
        "content": "new\n",
        "version": 1,
        "created_at": "2025-01-01T00:00:00+00:00",
        "updated_at": "2025-01-01T00:00:00+00:00",
    }
    # One colliding item refuses the whole import: the new file is not written either.
    assert dims4.fails(IMPORT, org, only(files=[new_file, data["files"][1]]), ns) == _exists(
        "files_pkey"
    )
    assert dims4.fails(IMPORT, org, only(files=[new_file], facts=data["facts"][:1]), ns) == _exists(
        "facts_pkey"
    )
    assert dims4.fails(
        IMPORT, org, only(files=[new_file], messages=data["messages"][-1:]), ns
    ) == _exists("messages_message_key")
    assert _tables(db) == before

    # Messages belong in a user namespace.
    message = {**data["messages"][0], "chat_id": "chat-9"}
    agent = {"scope": "agent", "agent_id": "importer", "owner_id": str(owner)}
    assert dims4.fails(IMPORT, org, only(messages=[message]), agent) == Failure(
        "22023", "MEMORY_INVALID", "messages can only be imported into a user namespace"
    )
    # An empty export imports nothing.
    assert dims4.value(IMPORT, org, only(), ns) == {"files": 0, "facts": 0, "messages": 0}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([], NOT_AN_EXPORT),
        ("an export", NOT_AN_EXPORT),
        ({"files": [], "facts": [], "messages": []}, NOT_AN_EXPORT),
        (
            {"format": "other", "version": 1, "files": [], "facts": [], "messages": []},
            NOT_AN_EXPORT,
        ),
        (
            {"format": "pgmemory", "version": 2, "files": [], "facts": [], "messages": []},
            NOT_AN_EXPORT,
        ),
        (
            {"format": "pgmemory", "version": "1", "files": [], "facts": [], "messages": []},
            NOT_AN_EXPORT,
        ),
        (
            {"format": "pgmemory", "version": 1, "facts": [], "messages": []},
            Failure("22023", "MEMORY_INVALID", 'export data needs "files": an array of objects'),
        ),
        (
            {"format": "pgmemory", "version": 1, "files": [], "facts": [1], "messages": []},
            Failure("22023", "MEMORY_INVALID", 'export data needs "facts": an array of objects'),
        ),
        (
            {"format": "pgmemory", "version": 1, "files": [], "facts": [], "messages": {}},
            Failure("22023", "MEMORY_INVALID", 'export data needs "messages": an array of objects'),
        ),
        (
            {
                "format": "pgmemory",
                "version": 1,
                "files": [],
                "facts": [{"id": "not a uuid", "content": "x", "version": 1}],
                "messages": [],
            },
            Failure(
                "22023",
                "MEMORY_INVALID",
                'each fact of an export needs an "id": a uuid',
            ),
        ),
    ],
)
def test_import_refuses_a_malformed_export(
    service: Principal, org: uuid.UUID, db: psycopg.Connection, data: Any, expected: Failure
) -> None:
    before = _tables(db)
    assert service.fails(IMPORT, org, json.dumps(data), {"owner_id": str(uuid.uuid4())}) == expected
    assert _tables(db) == before


def test_only_the_service_or_the_user_may_export(
    as_: Callable[..., Principal], login_dsn, org: uuid.UUID, service: Principal
) -> None:
    web = as_(None, login_dsn(USER_LOGIN))
    assert web.fails(EXPORT, org, {}) == Failure(
        "42501", "MEMORY_FORBIDDEN", not_the_service(USER_LOGIN)
    )
    assert web.fails("SELECT memory.erase_user(%s, %s)", org, uuid.uuid4()) == Failure(
        "42501", "MEMORY_FORBIDDEN", not_the_service(USER_LOGIN)
    )
    # The service must say whose user namespace it means.
    assert service.fails(EXPORT, org, {}) == Failure(
        "22023", "MEMORY_INVALID", "the service must pass owner_id for a user namespace"
    )


def _export_with(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "format": "pgmemory",
        "version": 1,
        "files": [],
        "facts": [],
        "messages": [],
    }
    return {**base, **parts}


def test_import_refuses_a_file_below_a_file_and_dangling_successors(
    dims4: Principal, org: uuid.UUID
) -> None:
    owner = {"owner_id": str(uuid.uuid4())}
    stamp = "2026-01-01T00:00:00+00:00"
    file = {"content": "x", "version": 1, "created_at": stamp, "updated_at": stamp}
    nested = _export_with(
        files=[{**file, "path": "/memories/a.md"}, {**file, "path": "/memories/a.md/b.md"}]
    )
    assert dims4.fails(IMPORT, org, nested, owner) == Failure(
        "22023",
        "MEMORY_INVALID_PATH",
        "Cannot create /memories/a.md/b.md: /memories/a.md is a file",
    )
    fact = {
        "id": str(uuid.uuid4()),
        "content": "old",
        "version": 1,
        "created_at": stamp,
        "updated_at": stamp,
        "forgotten_at": stamp,
        "superseded_by": str(uuid.uuid4()),
        "embedding": None,
    }
    assert dims4.fails(IMPORT, org, _export_with(facts=[fact]), owner) == Failure(
        "22023", "MEMORY_INVALID", "a fact of this export is superseded by a fact that is not in it"
    )
    assert dims4.rows("SELECT count(*) FROM memory.facts") == [(0,)]
    assert dims4.rows("SELECT count(*) FROM memory.files") == [(0,)]


def test_an_export_imports_into_another_organization_as_it_is(
    dims4: Principal, org: uuid.UUID
) -> None:
    """Ids are unique per organization: the same fact ids load into another one."""
    owner = uuid.uuid4()
    ns = {"owner_id": str(owner)}
    ids = _fill_namespace(dims4, org, owner)
    exported = dims4.value(EXPORT, org, ns)
    elsewhere = uuid.uuid4()
    assert dims4.value(IMPORT, elsewhere, exported, ns) == {"files": 3, "facts": 6, "messages": 4}
    assert dims4.value(EXPORT, elsewhere, ns) == exported
    # Each organization's copy is its own: editing one leaves the other as it was.
    assert (
        dims4.value("SELECT memory.edit_fact(%s, %s, 'Speaks Dutch')", elsewhere, ids["edited"])
        == 3
    )
    assert dims4.value("SELECT memory.get_fact(%s, %s)", org, ids["edited"])["content"] == (
        "Speaks German and Dutch"
    )
