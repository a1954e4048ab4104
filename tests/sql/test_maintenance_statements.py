"""memory.maintenance_statements(): the own indexes memory.maintain() would build or
drop, as statements the tables' owner runs one by one (CREATE / DROP INDEX
CONCURRENTLY), so writes never wait for a build. Each test has its database of its own:
one user with 40 facts and 40 messages, namespace_index_min_rows 30."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest

from tests.support import Failure, Principal, user_claims

LINE = 30
FACTS = 40
SEARCH = "SELECT id FROM memory.search_facts(%s, '', %s::real[], '{}', %s)"


def _vector(n: int) -> list[float]:
    return [1.0, float(n), 0.5, -float(n)]


@pytest.fixture
def tenant(service: Principal, member, org: uuid.UUID) -> tuple[uuid.UUID, Principal, uuid.UUID]:
    """(user id, the user, their namespace id), with FACTS facts and FACTS messages."""
    service.value("SELECT memory.configure_embeddings(4)")
    service.value("SELECT memory.configure('namespace_index_min_rows', %s)", str(LINE))
    user_id, user = member()
    facts = [{"content": f"fact {n}", "embedding": _vector(n)} for n in range(FACTS)]
    user.rows("SELECT count(*) FROM memory.save_facts(%s, %s, '{}', 1.0)", org, facts)
    for n in range(FACTS):
        message = {"id": f"m{n}", "chat_id": "chat", "owner_id": str(user_id), "role": "user"}
        message["content"] = f"message {n}"
        service.value("SELECT memory.index_message(%s, %s, %s::real[])", org, message, _vector(n))
    ns = service.value("SELECT memory._namespace_id(%s, 'user', %s, NULL)", org, user_id)
    return user_id, user, ns


@pytest.fixture
def owner(dsn: str) -> Iterator[psycopg.Connection]:
    """The tables' owner (the superuser), outside any transaction block."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def _names(service: Principal, org: uuid.UUID, ns: uuid.UUID) -> dict[str, str]:
    return {
        kind: service.value("SELECT memory._namespace_index(%s, %s, %s)", kind, org, ns)
        for kind in ("fact", "message")
    }


def _own_indexes(service: Principal) -> list[tuple[str, bool]]:
    """(name, valid) of every index on facts or messages named as an own index."""
    return service.rows(
        "SELECT c.relname::text, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid IN ('memory.facts'::regclass, 'memory.messages'::regclass)"
        " AND c.relname ~ '^(facts|messages)_ns_' ORDER BY 1"
    )


def _statements(service: Principal) -> list[str]:
    return [r[0] for r in service.rows("SELECT * FROM memory.maintenance_statements()")]


def _run(owner: psycopg.Connection, statements: list[str]) -> list[list[tuple]]:
    """Each statement alone, as psql's \\gexec runs them; the rows of each."""
    out = []
    for statement in statements:
        cur = owner.execute(statement)
        out.append(cur.fetchall() if cur.description else [])
    return out


def _build(kind: str, table: str, name: str, org: uuid.UUID, ns: uuid.UUID) -> list[str]:
    building = f"{name}_building"
    live = " AND forgotten_at IS NULL" if kind == "fact" else ""
    about = json.dumps({"namespace_id": str(ns), "organization_id": str(org)})
    return [
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {building} ON memory.{table} USING hnsw"
        f" ((COALESCE(embedding, embedding)) public.vector_cosine_ops)"
        f" WHERE organization_id = '{org}'::uuid AND namespace_id = '{ns}'::uuid{live}",
        f"COMMENT ON INDEX memory.{building} IS '{about}'",
        f"ALTER INDEX memory.{building} RENAME TO {name}",
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name}_text_building ON memory.{table} USING gin"
        f" (search_text) WHERE organization_id = '{org}'::uuid AND namespace_id = '{ns}'::uuid{live}",
        f"ALTER INDEX memory.{name}_text_building RENAME TO {name}_text",
    ]


def _built(names: dict[str, str]) -> list[tuple[str, bool]]:
    """Every own index of `names` (HNSW and text), valid, as _own_indexes lists them."""
    return sorted((n, True) for name in names.values() for n in (name, f"{name}_text"))


def _routed(service: Principal, org: uuid.UUID, ns: uuid.UUID) -> list[str]:
    """The kinds whose searches of the namespace go through its own index (on 41
    rows the planner then sorts them rather than walk the graph, so the scans do
    not show it: tests/sql/test_namespace_indexes.py reads them on more rows)."""
    return [
        kind
        for kind in ("fact", "message")
        if service.value("SELECT memory._own_indexed(%s, %s, %s)", kind, org, [ns]) == [ns]
    ]


def _searched_through(
    dsn: str, user_id: uuid.UUID, org: uuid.UUID, query: list[float]
) -> tuple[list, set]:
    """A user's search, and the indexes its transaction scanned."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(user_claims(user_id)),)
        )
        rows = conn.execute(SEARCH, (org, query, 3)).fetchall()
        scanned = conn.execute(
            "SELECT c.relname::text FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE i.indrelid = 'memory.facts'::regclass AND pg_stat_get_xact_numscans(c.oid) > 0"
        ).fetchall()
    return rows, {r[0] for r in scanned}


def test_the_statements_build_and_drop_what_maintain_would(tenant, service, org, owner, dsn):
    user_id, _, ns = tenant
    names = _names(service, org, ns)
    statements = _statements(service)
    assert statements == [
        *_build("fact", "facts", names["fact"], org, ns),
        *_build("message", "messages", names["message"], org, ns),
        "SELECT * FROM memory.maintain()",
    ]
    # maintain() at the end finds the indexes built and measures them; nothing to report.
    assert _run(owner, statements)[-1] == []
    assert _own_indexes(service) == _built(names)
    for kind in ("fact", "message"):
        about = service.value("SELECT memory._own_index_about(%s, %s, %s)", kind, org, ns)
        assert (about["rows"], about["namespace_id"]) == (FACTS, str(ns))
        assert about["ef_search"] >= 40
    assert service.rows("SELECT kind FROM memory.namespace_lexemes ORDER BY 1") == [
        ("fact",),
        ("message",),
    ]
    assert _routed(service, org, ns) == ["fact", "message"]
    assert len(_searched_through(dsn, user_id, org, _vector(7))[0]) == 3
    # Nothing left to do, either way.
    assert _statements(service) == ["SELECT * FROM memory.maintain()"]
    assert service.rows("SELECT * FROM memory.maintain()") == []
    # Shrunk out of (the line at 0): dropped concurrently, and their counts with the last step.
    service.value("SELECT memory.configure('namespace_index_min_rows', '0')")
    statements = _statements(service)
    assert statements == [
        f"DROP INDEX CONCURRENTLY IF EXISTS memory.{names['fact']}_text",
        f"DROP INDEX CONCURRENTLY IF EXISTS memory.{names['fact']}",
        f"DROP INDEX CONCURRENTLY IF EXISTS memory.{names['message']}_text",
        f"DROP INDEX CONCURRENTLY IF EXISTS memory.{names['message']}",
        "SELECT * FROM memory.maintain()",
    ]
    assert _run(owner, statements)[-1] == []
    assert _own_indexes(service) == []
    assert service.rows("SELECT * FROM memory.namespace_lexemes") == []
    assert _routed(service, org, ns) == []
    assert len(_searched_through(dsn, user_id, org, _vector(7))[0]) == 3


def test_a_kept_index_missing_its_text_index_gets_only_that(tenant, service, org, owner):
    # One built before text indexes were: its HNSW index stays, the text index is built.
    _, _, ns = tenant
    names = _names(service, org, ns)
    _run(owner, _statements(service))
    oids = service.rows("SELECT %s::regclass::oid::int", f"memory.{names['fact']}")
    owner.execute(f"DROP INDEX memory.{names['fact']}_text")
    statements = _statements(service)
    assert statements == [*_build("fact", "facts", names["fact"], org, ns)[3:], statements[-1]]
    assert statements[-1] == "SELECT * FROM memory.maintain()"
    assert _run(owner, statements)[-1] == []
    assert _own_indexes(service) == _built(names)
    assert service.rows("SELECT %s::regclass::oid::int", f"memory.{names['fact']}") == oids


NEW = [0.0, 0.0, -7.0, 1.0]  # far from every vector of the tenant: no near-duplicate


def _open_writer(dsn: str, user_id: uuid.UUID, org: uuid.UUID) -> psycopg.Connection:
    """A user's save_fact in a transaction left open (the caller commits)."""
    conn = psycopg.connect(dsn)
    conn.execute(
        "SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(user_claims(user_id)),)
    )
    conn.execute("SELECT memory.save_fact(%s, 'written before the build', %s::real[])", (org, NEW))
    return conn


def _in_background(work: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as err:  # reported by the test
            errors.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def _wait_until_blocked(dsn: str, query_start: str) -> None:
    """Until a backend running a statement that starts so waits on a lock (at most 60 s)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(600):
            if conn.execute(
                "SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (query_start + "%",),
            ).fetchall():
                return
            time.sleep(0.1)
    raise AssertionError(f"no {query_start!r} waited on a lock")


def _save_now(dsn: str, user_id: uuid.UUID, org: uuid.UUID) -> uuid.UUID:
    """A user's save_fact that gives up after 2 s waiting on a lock."""
    with psycopg.connect(dsn, options="-c lock_timeout=2s") as conn:
        conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(user_claims(user_id)),)
        )
        return conn.execute(
            "SELECT memory.save_fact(%s, 'written during the build', %s::real[])", (org, NEW)
        ).fetchone()[0]


def test_a_concurrent_build_lets_new_writes_through(tenant, service, member, org, owner, dsn):
    # A concurrent build waits for the writers already running (here another user's),
    # not the other way round: a new writer saves at once, and searches go on without it.
    user_id, _, ns = tenant
    other_id, _ = member()
    names = _names(service, org, ns)
    statements = _statements(service)
    early = _open_writer(dsn, other_id, org)
    build, errors = _in_background(lambda: _run(owner, statements))
    try:
        _wait_until_blocked(dsn, "CREATE INDEX CONCURRENTLY")
        saved = _save_now(dsn, user_id, org)
        rows, scanned = _searched_through(dsn, user_id, org, NEW)
        assert rows[0] == (saved,)
        assert _routed(service, org, ns) == [] and f"{names['fact']}_building" not in scanned
        assert (f"{names['fact']}_building", False) in _own_indexes(service)
    finally:
        early.commit()
        early.close()
        build.join(120)
    assert errors == [] and not build.is_alive()
    assert _own_indexes(service) == _built(names)
    assert _routed(service, org, ns) == ["fact", "message"]
    assert _searched_through(dsn, user_id, org, NEW)[0][0] == (saved,)
    assert service.value("SELECT memory._own_index_about('fact', %s, %s)", org, ns)["rows"] == 41


def test_plain_maintain_makes_new_writes_wait(tenant, service, member, org, dsn):
    # Why the statements exist: maintain()'s CREATE INDEX waits for the running writer,
    # and every new writer of the table queues behind it.
    user_id, _, ns = tenant
    other_id, _ = member()
    early = _open_writer(dsn, other_id, org)
    maintain, errors = _in_background(lambda: service.rows("SELECT * FROM memory.maintain()"))
    try:
        _wait_until_blocked(dsn, "SELECT * FROM memory.maintain()")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            _save_now(dsn, user_id, org)
    finally:
        early.commit()
        early.close()
        maintain.join(120)
    assert errors == []
    assert _own_indexes(service) == _built(_names(service, org, ns))


def _cancelled_build(service: Principal, member, org: uuid.UUID, owner, dsn: str) -> None:
    """The first statement (the facts' concurrent build) cancelled while it waits."""
    other_id, _ = member()
    create = _statements(service)[0]
    early = _open_writer(dsn, other_id, org)
    try:
        owner.execute("SET statement_timeout = '300ms'")
        with pytest.raises(psycopg.errors.QueryCanceled):
            owner.execute(create)
    finally:
        owner.execute("RESET statement_timeout")
        early.commit()
        early.close()


def test_a_failed_build_is_left_to_the_next_statements(tenant, service, member, org, owner, dsn):
    # A build cancelled mid-way leaves an invalid index under its building name: no
    # search looks it up, maintain() leaves it alone, the next statements drop it first.
    user_id, _, ns = tenant
    names = _names(service, org, ns)
    _cancelled_build(service, member, org, owner, dsn)
    leftover = f"{names['fact']}_building"
    assert _own_indexes(service) == [(leftover, False)]
    rows, scanned = _searched_through(dsn, user_id, org, _vector(7))
    assert len(rows) == 3 and leftover not in scanned and _routed(service, org, ns) == []
    service.value("SELECT memory.configure('namespace_index_min_rows', '0')")
    assert service.rows("SELECT * FROM memory.maintain()") == []
    assert _own_indexes(service) == [(leftover, False)]
    service.value("SELECT memory.configure('namespace_index_min_rows', %s)", str(LINE))
    statements = _statements(service)
    assert statements == [
        f"DROP INDEX CONCURRENTLY IF EXISTS memory.{leftover}",
        *_build("fact", "facts", names["fact"], org, ns),
        *_build("message", "messages", names["message"], org, ns),
        "SELECT * FROM memory.maintain()",
    ]
    _run(owner, statements)
    assert _own_indexes(service) == _built(names)


def test_configure_embeddings_drops_a_leftover_build(tenant, service, member, org, owner, dsn):
    _cancelled_build(service, member, org, owner, dsn)
    assert len(_own_indexes(service)) == 1
    service.value("SELECT memory.configure_embeddings(8, 'halfvec')")
    assert _own_indexes(service) == []


def test_maintenance_statements_are_the_services_alone(tenant, service, member, org):
    _, user, _ = tenant
    _, admin = member("memory.read", "memory.manage")
    _, stranger = member(organization=uuid.uuid4())
    for who in (user, admin, stranger):
        assert who.attempt("SELECT * FROM memory.maintenance_statements()") == Failure(
            "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this"
        )
