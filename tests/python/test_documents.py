"""Documents for agent runtimes from Python, sync and async, with one suite.

Service only: versioned text under an opaque scope key and a path, optimistic
concurrency (`DocumentConflict` on a stale version) and expiry.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgmemory
from pgmemory import Document, DocumentConflict, DocumentInfo
from tests.conftest import USER_LOGIN
from tests.python.conftest import Connect

SCOPE = "agent:eve/session:" + "x" * 4000  # eve's runtime uses long scope keys


def conflict(action: Any, *args: Any, **kwargs: Any) -> str:
    """The message of the DocumentConflict `action` raises."""
    with pytest.raises(DocumentConflict) as caught:
        action(*args, **kwargs)
    assert (caught.value.code, caught.value.sqlstate) == ("MEMORY_DOCUMENT_CONFLICT", "40001")
    return caught.value.message


def test_read_write_with_versions(connect: Connect) -> None:
    docs = connect().documents
    assert docs.read(SCOPE, "plan.md") is None
    assert docs.write(SCOPE, "plan.md", "step 1", None) == 1
    doc = docs.read(SCOPE, "plan.md")
    assert isinstance(doc, Document)
    assert (doc.content, doc.version, doc.expires_at) == ("step 1", 1, None)
    assert isinstance(doc.updated_at, datetime) and doc.updated_at.tzinfo is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.version = 2  # type: ignore[misc]

    # None: it must not exist yet.
    assert conflict(docs.write, SCOPE, "plan.md", "again", None) == (
        "document plan.md already exists (expected it not to)"
    )
    assert docs.write(SCOPE, "plan.md", "step 2", 1) == 2
    # A stale version writes nothing.
    assert conflict(docs.write, SCOPE, "plan.md", "lost update", 1) == (
        "document plan.md is at version 2, not 1"
    )
    assert (
        conflict(docs.write, SCOPE, "new.md", "x", 3) == "document new.md is at version none, not 3"
    )
    after = docs.read(SCOPE, "plan.md")
    assert after is not None
    assert (after.content, after.version) == ("step 2", 2)
    assert after.updated_at >= doc.updated_at
    # Scope keys are separate: the same path elsewhere does not exist.
    assert docs.read(SCOPE + "y", "plan.md") is None


def test_delete(connect: Connect) -> None:
    docs = connect().documents
    docs.write(SCOPE, "a.md", "1", None)
    docs.write(SCOPE, "a.md", "2", 1)
    assert conflict(docs.delete, SCOPE, "a.md", expected_version=1) == (
        "document a.md is at version 2, not 1"
    )
    assert docs.read(SCOPE, "a.md") is not None
    assert docs.delete(SCOPE, "a.md", expected_version=2) is True
    assert docs.read(SCOPE, "a.md") is None
    assert docs.delete(SCOPE, "a.md") is False
    docs.write(SCOPE, "b.md", "1", None)
    assert docs.delete(SCOPE, "b.md") is True  # no version: whatever is there
    # Deleted: it may be created afresh, at version 1.
    assert docs.write(SCOPE, "a.md", "again", None) == 1


def test_list(connect: Connect) -> None:
    docs = connect().documents
    for path in ("notes/b.md", "notes/a.md", "todo.md", "notes-old.md"):
        docs.write(SCOPE, path, path, None)
    docs.write(SCOPE, "notes/a.md", "edited", 1)
    docs.write("other scope", "notes/z.md", "elsewhere", None)

    listed = docs.list(SCOPE, "notes/")
    assert all(isinstance(d, DocumentInfo) for d in listed)
    assert [(d.path, d.version, d.expires_at) for d in listed] == [
        ("notes/a.md", 2, None),
        ("notes/b.md", 1, None),
    ]
    assert all(isinstance(d.updated_at, datetime) for d in listed)
    assert [d.path for d in docs.list(SCOPE)] == [
        "notes-old.md",
        "notes/a.md",
        "notes/b.md",
        "todo.md",
    ]
    assert docs.list(SCOPE, "nothing/") == []
    assert [d.path for d in docs.list("other scope")] == ["notes/z.md"]


def test_expiry_and_purge(connect: Connect, db: psycopg.Connection) -> None:
    docs = connect().documents
    assert docs.write(SCOPE, "short.md", "gone soon", None, expires_in=1) == 1
    assert docs.write(SCOPE, "long.md", "an hour", None, expires_in=3600) == 1
    docs.write(SCOPE, "forever.md", "kept", None)
    short = docs.read(SCOPE, "short.md")
    assert short is not None and short.expires_at is not None
    assert short.expires_at - short.updated_at == timedelta(seconds=1)
    listed = {d.path: d.expires_at for d in docs.list(SCOPE)}
    assert listed["short.md"] == short.expires_at
    assert listed["forever.md"] is None

    time.sleep(1.2)
    # Past its lifetime it reads as absent before any purge, and is not listed.
    assert docs.read(SCOPE, "short.md") is None
    assert [d.path for d in docs.list(SCOPE)] == ["forever.md", "long.md"]
    stored = "SELECT path FROM memory.documents ORDER BY path"
    assert [r[0] for r in db.execute(stored).fetchall()] == ["forever.md", "long.md", "short.md"]
    db.rollback()

    assert docs.purge() == 1
    assert [r[0] for r in db.execute(stored).fetchall()] == ["forever.md", "long.md"]
    db.rollback()
    assert docs.purge() == 0
    # An expired path counts as absent: None creates it again.
    assert docs.write(SCOPE, "short.md", "back", None) == 1
    with pytest.raises(pgmemory.Invalid, match="expires_in must be a positive number of seconds"):
        docs.write(SCOPE, "x.md", "x", None, expires_in=0)


def test_only_the_service(connect: Connect, grant: Any) -> None:
    service = connect()
    service.documents.write(SCOPE, "plan.md", "secret", None)
    user = service.as_user(grant())
    untrusted = connect(USER_LOGIN)  # no claims, but not a member of the service role
    for client in (user, untrusted):
        for action in (
            lambda d: d.read(SCOPE, "plan.md"),
            lambda d: d.write(SCOPE, "plan.md", "mine", 1),
            lambda d: d.delete(SCOPE, "plan.md"),
            lambda d: d.list(SCOPE),
            lambda d: d.purge(),
        ):
            with pytest.raises(pgmemory.Forbidden) as caught:
                action(client.documents)
            assert (caught.value.code, caught.value.sqlstate) == ("MEMORY_FORBIDDEN", "42501")
    doc = service.documents.read(SCOPE, "plan.md")
    assert doc is not None and (doc.content, doc.version) == ("secret", 1)


def test_bounds(connect: Connect) -> None:
    docs = connect().documents
    for scope_key, path, text in (
        ("", "a.md", "scope_key must be a non-empty string of at most 8192 bytes"),
        ("é" * 4097, "a.md", "scope_key must be a non-empty string of at most 8192 bytes"),
        (SCOPE, "p" * 4097, "path must be a non-empty string of at most 4096 bytes"),
    ):
        with pytest.raises(pgmemory.Invalid) as caught:
            docs.write(scope_key, path, "x", None)
        assert caught.value.message == text
    assert docs.write("é" * 4096, "p" * 4096, "at the limits", None) == 1
    assert docs.read("é" * 4096, "p" * 4096) is not None
