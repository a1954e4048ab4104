"""Memory.stats and archival.list, sync and async."""

from __future__ import annotations

import uuid
from typing import Any

from pgmemory import FactInfo
from tests.python.conftest import Connect


def test_stats_and_listing(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user_id = grant()
    user = connect().as_user(user_id)
    assert user.stats(org) == {
        "files": 0,
        "facts": 0,
        "facts_pending": 0,
        "forgotten": 0,
        "messages": 0,
        "messages_pending": 0,
    }
    ids = [user.archival.save(org, f"fact number {n}") for n in range(5)]
    user.archival.forget(org, ids[0])
    assert user.stats(org)["facts"] == 4
    assert user.stats(org)["forgotten"] == 1
    first = user.archival.list(org, max=2)
    assert all(isinstance(f, FactInfo) for f in first)
    assert [f.id for f in first] == ids[1:3]
    assert [f.id for f in user.archival.list(org, after=first[-1].id)] == ids[3:]
    assert [f.id for f in user.archival.list(org, forgotten=True)] == ids
    assert user.archival.list(org, forgotten=True)[0].forgotten_at is not None
    # Another user sees their own (empty) namespace.
    assert connect().as_user(grant()).archival.list(org) == []


def test_save_extracted_saves_more_than_one_call_holds(
    connect: Connect, grant: Any, org: uuid.UUID
) -> None:
    """1,001 facts: two save_facts calls, ords counting on, dedupe across them."""
    user = connect().as_user(grant())
    texts = [f"fact number {n}" for n in range(1000)] + ["Fact number 0"]
    rows = user.archival.save_extracted(org, texts)
    assert [r.ord for r in rows] == list(range(1, 1002))
    assert all(r.id is not None for r in rows[:1000])
    assert (rows[1000].id, rows[1000].duplicate_of, rows[1000].similarity) == (
        None,
        rows[0].id,
        1.0,
    )
    assert user.stats(org)["facts"] == 1000
