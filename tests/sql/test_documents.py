"""Documents for agent runtimes: versioned text under an opaque
scope key and path, optimistic concurrency, lifetimes, service only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier
from typing import Any

import psycopg
import pytest

from tests.conftest import SERVICE_LOGIN, USER_LOGIN
from tests.support import SERVICE, Failure, Principal, not_the_service

SCOPE = "agent-run:1234"
OTHER_SCOPE = "agent-run:5678"

READ = "SELECT memory.document_read(%s, %s)"
WRITE = "SELECT memory.document_write(%s, %s, %s, %s)"
WRITE_EXPIRING = "SELECT memory.document_write(%s, %s, %s, %s, %s)"
DELETE = "SELECT memory.document_delete(%s, %s, %s)"
LIST = "SELECT path, version FROM memory.document_list(%s, %s)"

WRITERS = 8
INCREMENTS = 25
BARRIER_TIMEOUT = 120  # seconds; only guards against a hang, never asserted on


def conflict(message: str) -> Failure:
    return Failure("40001", "MEMORY_DOCUMENT_CONFLICT", message)


def invalid(message: str) -> Failure:
    return Failure("22023", "MEMORY_INVALID", message)


def table(db: psycopg.Connection, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of memory.documents as the superuser, outside every function."""
    with db.cursor() as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    db.commit()
    return rows


def stored(db: psycopg.Connection, scope: str, path: str) -> tuple[Any, ...] | None:
    rows = table(
        db,
        "SELECT content, version, expires_at, updated_at FROM memory.documents "
        "WHERE scope_key = %s AND path = %s",
        scope,
        path,
    )
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


def as_json(db: psycopg.Connection, scope: str, path: str) -> dict[str, Any]:
    """What document_read must answer for a stored document, built from its row."""
    return table(
        db,
        "SELECT jsonb_build_object('content', content, 'version', version, "
        "'expires_at', expires_at, 'updated_at', updated_at) "
        "FROM memory.documents WHERE scope_key = %s AND path = %s",
        scope,
        path,
    )[0][0]


# ---------------------------------------------------------------- read / write / delete


def test_write_read_and_versions(service: Principal, db: psycopg.Connection) -> None:
    assert service.value(READ, SCOPE, "notes.md") is None
    assert service.value(WRITE, SCOPE, "notes.md", "first", None) == 1

    read = service.value(READ, SCOPE, "notes.md")
    assert read == as_json(db, SCOPE, "notes.md")
    assert set(read) == {"content", "version", "expires_at", "updated_at"}
    assert (read["content"], read["version"], read["expires_at"]) == ("first", 1, None)
    assert isinstance(read["updated_at"], str)

    # null = "must not exist yet": the document exists now.
    assert service.fails(WRITE, SCOPE, "notes.md", "again", None) == conflict(
        "document notes.md already exists (expected it not to)"
    )
    assert service.value(WRITE, SCOPE, "notes.md", "second", 1) == 2
    after_second = stored(db, SCOPE, "notes.md")
    assert after_second[:3] == ("second", 2, None)

    # A stale version writes nothing.
    assert service.fails(WRITE, SCOPE, "notes.md", "stale", 1) == conflict(
        "document notes.md is at version 2, not 1"
    )
    assert service.fails(WRITE, SCOPE, "notes.md", "ahead", 3) == conflict(
        "document notes.md is at version 2, not 3"
    )
    assert stored(db, SCOPE, "notes.md") == after_second
    assert service.value(READ, SCOPE, "notes.md")["content"] == "second"

    # A version for a document that does not exist.
    assert service.fails(WRITE, SCOPE, "absent.md", "x", 5) == conflict(
        "document absent.md is at version none, not 5"
    )
    assert stored(db, SCOPE, "absent.md") is None

    # Content is required.
    assert service.fails(WRITE, SCOPE, "notes.md", None, 2) == invalid(
        "content must be a string of at most 10,000,000 characters"
    )
    assert stored(db, SCOPE, "notes.md") == after_second
    # Empty content is a document.
    assert service.value(WRITE, SCOPE, "empty.md", "", None) == 1
    assert service.value(READ, SCOPE, "empty.md")["content"] == ""


def test_delete_with_versions(service: Principal, db: psycopg.Connection) -> None:
    service.value(WRITE, SCOPE, "a.md", "one", None)
    service.value(WRITE, SCOPE, "a.md", "two", 1)

    assert service.fails(DELETE, SCOPE, "a.md", 1) == conflict(
        "document a.md is at version 2, not 1"
    )
    assert stored(db, SCOPE, "a.md")[:2] == ("two", 2)
    assert service.value(DELETE, SCOPE, "a.md", 2) is True
    assert service.value(READ, SCOPE, "a.md") is None
    assert stored(db, SCOPE, "a.md") is None

    # Absent: null deletes nothing and says so; a version is a conflict.
    assert service.value(DELETE, SCOPE, "a.md", None) is False
    assert service.value("SELECT memory.document_delete(%s, %s)", SCOPE, "a.md") is False
    assert service.fails(DELETE, SCOPE, "a.md", 2) == conflict(
        "document a.md is at version none, not 2"
    )

    # null deletes whatever version is there.
    service.value(WRITE, SCOPE, "b.md", "one", None)
    service.value(WRITE, SCOPE, "b.md", "two", 1)
    assert service.value(DELETE, SCOPE, "b.md", None) is True
    assert table(db, "SELECT count(*) FROM memory.documents") == [(0,)]

    # A deleted document can be created again, from version 1.
    assert service.value(WRITE, SCOPE, "b.md", "reborn", None) == 1


def test_neighbouring_documents_are_untouched(service: Principal, db: psycopg.Connection) -> None:
    """Each call acts on its own (scope, path) only, whatever else is stored."""
    service.value(WRITE, SCOPE, "a.md", "a1", None)
    service.value(WRITE, SCOPE, "a.md", "a2", 1)
    service.value(WRITE, OTHER_SCOPE, "a.md", "other a1", None)
    service.value(WRITE, SCOPE, "b.md", "b1", None)

    assert service.value(WRITE, SCOPE, "b.md", "b2", 1) == 2
    assert service.fails(WRITE, SCOPE, "c.md", "c", 2) == conflict(
        "document c.md is at version none, not 2"
    )
    assert service.fails(DELETE, SCOPE, "c.md", 2) == conflict(
        "document c.md is at version none, not 2"
    )
    assert service.value(DELETE, SCOPE, "c.md", None) is False
    assert service.value(DELETE, SCOPE, "b.md", None) is True
    assert table(
        db, "SELECT scope_key, path, content, version FROM memory.documents ORDER BY 1, 2"
    ) == [(SCOPE, "a.md", "a2", 2), (OTHER_SCOPE, "a.md", "other a1", 1)]

    # An expired neighbour is not taken for the document being written.
    service.value(WRITE_EXPIRING, SCOPE, "0-expiring.md", "short", None, 1)
    time.sleep(1.2)
    assert service.value(WRITE, SCOPE, "a.md", "a3", 2) == 3
    assert service.value(DELETE, OTHER_SCOPE, "a.md", 1) is True
    assert table(
        db, "SELECT scope_key, path, content, version FROM memory.documents ORDER BY 1, 2"
    ) == [(SCOPE, "0-expiring.md", "short", 1), (SCOPE, "a.md", "a3", 3)]


def test_list_with_prefix_and_separate_scopes(service: Principal) -> None:
    for path in ("notes/b.md", "notes/a.md", "notes/sub/c.md", "notesX.md", "other/d.md", "Z.md"):
        service.value(WRITE, SCOPE, path, f"content of {path}", None)
    service.value(WRITE, SCOPE, "notes/a.md", "edited", 1)
    service.value(WRITE_EXPIRING, SCOPE, "notes/expiring.md", "soon gone", None, 3600)
    # The same path in another scope is another document.
    service.value(WRITE, OTHER_SCOPE, "notes/a.md", "elsewhere", None)
    service.value(WRITE, OTHER_SCOPE, "notes/only-here.md", "only here", None)

    assert service.rows(LIST, SCOPE, "notes/") == [
        ("notes/a.md", 2),
        ("notes/b.md", 1),
        ("notes/expiring.md", 1),
        ("notes/sub/c.md", 1),
    ]
    # Ordered byte-wise ("Z" before "n"), everything with the default prefix.
    assert service.rows("SELECT path, version FROM memory.document_list(%s)", SCOPE) == [
        ("Z.md", 1),
        ("notes/a.md", 2),
        ("notes/b.md", 1),
        ("notes/expiring.md", 1),
        ("notes/sub/c.md", 1),
        ("notesX.md", 1),
        ("other/d.md", 1),
    ]
    assert service.rows(LIST, SCOPE, "notes/sub/") == [("notes/sub/c.md", 1)]
    assert service.rows(LIST, SCOPE, "nothing/") == []
    assert service.rows(LIST, OTHER_SCOPE, "") == [
        ("notes/a.md", 1),
        ("notes/only-here.md", 1),
    ]
    assert service.rows(LIST, "no such scope", "") == []

    assert service.value(READ, SCOPE, "notes/a.md")["content"] == "edited"
    assert service.value(READ, OTHER_SCOPE, "notes/a.md")["content"] == "elsewhere"
    assert service.value(READ, OTHER_SCOPE, "notes/b.md") is None
    # Deleting in one scope leaves the other alone.
    assert service.value(DELETE, OTHER_SCOPE, "notes/a.md", 1) is True
    assert service.value(READ, SCOPE, "notes/a.md")["version"] == 2

    # The listing carries the lifetime and the update time of each document.
    listed = service.rows(
        "SELECT path, expires_at IS NOT NULL, updated_at IS NOT NULL "
        "FROM memory.document_list(%s, 'notes/e')",
        SCOPE,
    )
    assert listed == [("notes/expiring.md", True, True)]


def test_key_limits(service: Principal, db: psycopg.Connection) -> None:
    scope_max = "s" * 8192
    path_max = "p" * 4096
    assert service.value(WRITE, scope_max, path_max, "at the limits", None) == 1
    assert service.value(READ, scope_max, path_max)["content"] == "at the limits"
    assert service.rows(LIST, scope_max, "") == [(path_max, 1)]
    assert service.value(WRITE, scope_max, path_max, "again", 1) == 2
    # eve's runtime uses scope keys up to 4,096 bytes.
    eve_scope = "eve:" + "k" * 4092
    assert len(eve_scope.encode()) == 4096
    assert service.value(WRITE, eve_scope, "state.json", "{}", None) == 1
    assert service.value(READ, eve_scope, "state.json")["content"] == "{}"
    # Multibyte: the limit is in bytes (é is two bytes).
    assert service.value(WRITE, "é" * 4096, "ü" * 2048, "bytes", None) == 1

    too_long_scope = invalid("scope_key must be a non-empty string of at most 8192 bytes")
    too_long_path = invalid("path must be a non-empty string of at most 4096 bytes")
    for scope in ("s" * 8193, "é" * 4096 + "s", "", None):
        assert service.fails(WRITE, scope, "x.md", "c", None) == too_long_scope, scope
        assert service.fails(READ, scope, "x.md") == too_long_scope
        assert service.fails(DELETE, scope, "x.md", None) == too_long_scope
        assert service.fails(LIST, scope, "") == too_long_scope
    for path in ("p" * 4097, "ü" * 2048 + "p", "", None):
        assert service.fails(WRITE, SCOPE, path, "c", None) == too_long_path, path
        assert service.fails(READ, SCOPE, path) == too_long_path
        assert service.fails(DELETE, SCOPE, path, None) == too_long_path

    assert table(
        db,
        "SELECT octet_length(scope_key), octet_length(path), version FROM memory.documents "
        "ORDER BY 1, 2, 3",
    ) == [(4096, 10, 1), (8192, 4096, 1), (8192, 4096, 2)]


def test_unicode_keys(service: Principal) -> None:
    scope = "ünïcödé/スコープ 🌍"
    path = "日本語/メモ 👩‍💻.md"
    text = "Grüße aus Köln 🌍\n東京は晴れ\n"
    assert service.value(WRITE, scope, path, text, None) == 1
    assert service.value(READ, scope, path)["content"] == text
    assert service.rows(LIST, scope, "日本語/") == [(path, 1)]
    # Keys are opaque bytes: a canonically equal but differently encoded path
    # (NFD café) is another document.
    assert service.value(WRITE, scope, "caf\u00e9.md", "composed", None) == 1
    assert service.value(READ, scope, "cafe\u0301.md") is None
    assert service.value(WRITE, scope, "cafe\u0301.md", "decomposed", None) == 1
    assert service.value(READ, scope, "caf\u00e9.md")["content"] == "composed"
    assert service.rows(LIST, scope, "caf") == [("cafe\u0301.md", 1), ("caf\u00e9.md", 1)]
    assert service.value(READ, "unicode/スコープ 🌍", path) is None
    assert service.value(WRITE, scope, path, text + "more", 1) == 2
    assert service.value(DELETE, scope, path, 2) is True


# ---------------------------------------------------------------- concurrency


def test_concurrent_read_modify_write_applies_every_increment(
    as_: Callable[..., Principal], service: Principal
) -> None:
    service.value(WRITE, SCOPE, "counter", "0", None)
    writers = [as_(SERVICE) for _ in range(WRITERS)]
    barrier = Barrier(WRITERS, timeout=BARRIER_TIMEOUT)

    def work(principal: Principal) -> list[tuple[int, Failure]]:
        barrier.wait()
        conflicts: list[tuple[int, Failure]] = []
        for _ in range(INCREMENTS):
            while True:
                doc = principal.value(READ, SCOPE, "counter")
                try:
                    principal.value(
                        WRITE, SCOPE, "counter", str(int(doc["content"]) + 1), doc["version"]
                    )
                except psycopg.Error as err:
                    failure = Failure(
                        err.sqlstate or "", err.diag.message_hint, err.diag.message_primary or ""
                    )
                    conflicts.append((doc["version"], failure))
                    continue
                break
        return conflicts

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        results = list(pool.map(work, writers))

    seen = [failure for failures in results for failure in failures]
    assert len(seen) >= 0  # how many depends on timing; every one must be a conflict
    for expected, failure in seen:
        # Someone else wrote in between: the document is at a later version.
        found = re.fullmatch(r"document counter is at version (\d+), not (\d+)", failure.message)
        assert found, failure
        assert int(found[2]) == expected < int(found[1]) <= WRITERS * INCREMENTS + 1, failure
        assert failure == conflict(failure.message)
    final = service.value(READ, SCOPE, "counter")
    assert (final["content"], final["version"]) == (
        str(WRITERS * INCREMENTS),
        WRITERS * INCREMENTS + 1,
    )


# ---------------------------------------------------------------- expiry


def test_expired_documents_read_as_absent_and_purge_removes_exactly_them(
    service: Principal, db: psycopg.Connection
) -> None:
    for path in ("e1", "e2", "e3"):
        assert service.value(WRITE_EXPIRING, SCOPE, path, f"short {path}", None, 1) == 1
    assert service.value(WRITE, SCOPE, "live1", "stays", None) == 1
    assert service.value(WRITE_EXPIRING, SCOPE, "live2", "stays a while", None, 3600) == 1
    live2 = service.value(READ, SCOPE, "live2")
    assert live2["expires_at"] is not None
    assert live2 == as_json(db, SCOPE, "live2")
    assert service.value(READ, SCOPE, "e1")["content"] == "short e1"

    time.sleep(1.2)

    # Past their lifetime, before any purge: absent to every reader ...
    for path in ("e1", "e2", "e3"):
        assert service.value(READ, SCOPE, path) is None
    assert service.rows(LIST, SCOPE, "") == [("live1", 1), ("live2", 1)]
    assert service.rows(LIST, SCOPE, "e") == []
    # ... though their rows are still there.
    assert table(
        db, "SELECT path FROM memory.documents WHERE scope_key = %s ORDER BY path", SCOPE
    ) == [("e1",), ("e2",), ("e3",), ("live1",), ("live2",)]
    # An expired document cannot be updated as if it were still there.
    assert service.fails(WRITE, SCOPE, "e1", "late", 1) == conflict(
        "document e1 is at version none, not 1"
    )

    assert service.value("SELECT memory.purge_documents()") == 3
    assert table(db, "SELECT path, content, version FROM memory.documents ORDER BY path") == [
        ("live1", "stays", 1),
        ("live2", "stays a while", 1),
    ]
    assert service.value(READ, SCOPE, "live2") == live2
    assert service.value("SELECT memory.purge_documents()") == 0


def test_write_over_expired_document_starts_again(
    service: Principal, db: psycopg.Connection
) -> None:
    assert service.value(WRITE_EXPIRING, SCOPE, "session", "old", None, 1) == 1
    assert service.value(WRITE, SCOPE, "session", "old, edited", 1) == 2
    # That write had no lifetime: the document lives on; give it one again.
    assert service.value(READ, SCOPE, "session")["expires_at"] is None
    assert service.value(WRITE_EXPIRING, SCOPE, "session", "old, expiring", 2, 1) == 3
    time.sleep(1.2)
    assert service.value(READ, SCOPE, "session") is None
    assert stored(db, SCOPE, "session")[:2] == ("old, expiring", 3)  # not purged yet

    assert service.value(WRITE, SCOPE, "session", "new", None) == 1
    assert service.value(READ, SCOPE, "session")["content"] == "new"
    assert stored(db, SCOPE, "session")[:3] == ("new", 1, None)
    assert service.value("SELECT memory.purge_documents()") == 0


@pytest.mark.parametrize("expires_in", [0, -1, -3600])
def test_lifetime_must_be_positive(
    service: Principal, db: psycopg.Connection, expires_in: int
) -> None:
    refused = invalid("expires_in must be a positive number of seconds")
    assert service.fails(WRITE_EXPIRING, SCOPE, "doc", "c", None, expires_in) == refused
    service.value(WRITE, SCOPE, "doc", "c", None)
    assert service.fails(WRITE_EXPIRING, SCOPE, "doc", "c2", 1, expires_in) == refused
    assert stored(db, SCOPE, "doc")[:3] == ("c", 1, None)


# ---------------------------------------------------------------- service only

CALLS: list[tuple[str, tuple[Any, ...]]] = [
    (READ, (SCOPE, "doc")),
    (WRITE, (SCOPE, "doc", "mine now", None)),
    (WRITE, (SCOPE, "doc", "mine now", 1)),
    (WRITE_EXPIRING, (SCOPE, "new", "x", None, 60)),
    (DELETE, (SCOPE, "doc", None)),
    (DELETE, (SCOPE, "doc", 1)),
    ("SELECT memory.document_delete(%s, %s)", (SCOPE, "doc")),
    (LIST, (SCOPE, "")),
    ("SELECT * FROM memory.document_list(%s)", (SCOPE,)),
    ("SELECT memory.purge_documents()", ()),
]


def test_only_the_service_may_use_documents(
    as_: Callable[..., Principal],
    service: Principal,
    member,
    login_dsn,
    db: psycopg.Connection,
) -> None:
    service.value(WRITE_EXPIRING, SCOPE, "doc", "service text", None, 1)
    time.sleep(1.2)  # an expired document a caller could try to purge
    service.value(WRITE, SCOPE, "live", "service text", None)
    before = table(db, "SELECT to_jsonb(d)::text FROM memory.documents d ORDER BY 1")

    _, user = member("memory.read", "memory.manage")
    web_user = as_(user.claims, login_dsn(USER_LOGIN))
    only_service = Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this"
    )
    callers = {
        "user": (user, only_service),
        "user on the web login": (web_user, only_service),
        "web login, no claims": (
            as_(None, login_dsn(USER_LOGIN)),
            Failure("42501", "MEMORY_FORBIDDEN", not_the_service(USER_LOGIN)),
        ),
        "web login, empty claims": (
            as_(SERVICE, login_dsn(USER_LOGIN)),
            Failure("42501", "MEMORY_FORBIDDEN", not_the_service(USER_LOGIN)),
        ),
        "web login claiming the service": (
            as_({"role": "service_role"}, login_dsn(USER_LOGIN)),
            Failure(
                "42501", "MEMORY_FORBIDDEN", "not permitted: this login may not act as the service"
            ),
        ),
    }
    for name, (caller, expected) in callers.items():
        for query, params in CALLS:
            assert caller.fails(query, *params) == expected, (name, query, params)
    assert table(db, "SELECT to_jsonb(d)::text FROM memory.documents d ORDER BY 1") == before

    # The service login, with no claims or claiming the service, may.
    app = as_(SERVICE, login_dsn(SERVICE_LOGIN))
    assert app.value(READ, SCOPE, "live")["content"] == "service text"
    claiming = as_({"role": "service_role"}, login_dsn(SERVICE_LOGIN))
    assert claiming.value(WRITE, SCOPE, "live", "app text", 1) == 2
    assert app.value("SELECT memory.purge_documents()") == 1
