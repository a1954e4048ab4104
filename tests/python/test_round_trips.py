"""A client call is one network round trip: BEGIN, the claims, the call and COMMIT go out
in psycopg's pipeline mode before the client waits, once, for the answers.

No timing: libpq's protocol trace of the connection shows every message the client
sent. Each Sync is one wait for the server (one round trip), and a simple Query is
another; a call must send exactly one Sync and no Query, and a failed call one
ROLLBACK more, after which nothing of the call (its transaction, its claims) is left.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import pgmemory
from pgmemory import AsyncMemory, Memory
from tests.conftest import SERVICE_LOGIN, USER_LOGIN

CREATE_A = {"command": "create", "path": "/memories/a.md", "file_text": "hello\n"}
MISSING = {"command": "view", "path": "/memories/nope.md"}
CLAIMS = "SELECT set_config('request.jwt.claims', $1, true)"
IDLE = psycopg.pq.TransactionStatus.IDLE


@contextmanager
def traced(pgconn: Any) -> Iterator[list[tuple[str, str]]]:
    """(message type, its SQL or '') of each message the client sends meanwhile."""
    sent: list[tuple[str, str]] = []
    with tempfile.TemporaryFile("w+") as f:
        pgconn.trace(f.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield sent
        finally:
            pgconn.untrace()
            os.fsync(f.fileno())
            f.seek(0)
            for line in f.read().splitlines():
                fields = line.split("\t")
                if fields[0] == "F" and len(fields) > 2:  # F, length, type, fields
                    kind, rest = fields[2], fields[3] if len(fields) > 3 else ""
                    quoted = rest.split('"')  # Parse: name, SQL; Query: SQL
                    sql = {"Parse": 3, "Query": 1}.get(kind)
                    sent.append((kind, quoted[sql] if sql is not None else ""))


def waits(sent: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The statements sent (Parse: each new to the connection here) and the messages
    the client then waits after (Sync, Query)."""
    return [(kind, sql) for kind, sql in sent if kind in ("Parse", "Query", "Sync")]


def one_trip(call_sql: str, begin: str = "BEGIN") -> list[tuple[str, str]]:
    return [
        ("Parse", begin),
        ("Parse", CLAIMS),
        ("Parse", call_sql),
        ("Parse", "COMMIT"),
        ("Sync", ""),
    ]


RUN = "SELECT memory.run($1::uuid, $2::jsonb, $3::jsonb)"


def assert_nothing_left(conn: psycopg.Connection[Any], autocommit: bool) -> None:
    assert conn.info.transaction_status == IDLE
    assert conn.autocommit is autocommit  # as the caller left it
    with conn.cursor() as cur:
        cur.execute("SELECT current_setting('request.jwt.claims', true)")
        assert cur.fetchone() == ("",)
    if not autocommit:
        conn.rollback()


@pytest.mark.parametrize("autocommit", [False, True])
def test_a_call_is_one_round_trip(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID, autocommit: bool
) -> None:
    with psycopg.connect(login_dsn(SERVICE_LOGIN), autocommit=autocommit) as conn:
        user = Memory(conn).as_user(grant())
        user.list_files(org)  # the first call also looks up pgvector's types
        with traced(conn.pgconn) as sent:
            assert user.run(org, CREATE_A) == "File created successfully at: /memories/a.md"
        assert waits(sent) == one_trip(RUN)
        assert_nothing_left(conn, autocommit)

        with traced(conn.pgconn) as sent, pytest.raises(pgmemory.NotFound) as caught:
            user.run(org, MISSING)
        assert caught.value.message == (
            "The path /memories/nope.md does not exist. Please provide a valid path."
        )
        # The COMMIT was skipped with the rest of the pipeline: the client rolls back.
        assert waits(sent) == [*one_trip(RUN), ("Query", "ROLLBACK")]
        assert_nothing_left(conn, autocommit)


def test_the_connections_settings_open_the_transaction(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    # As conn.transaction() would: BEGIN with the connection's isolation level and mode.
    with psycopg.connect(login_dsn(SERVICE_LOGIN), autocommit=True) as conn:
        conn.read_only = True
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        user = Memory(conn).as_user(grant())
        user.list_files(org)
        with traced(conn.pgconn) as sent, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            user.run(org, CREATE_A)
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        assert waits(sent) == [*one_trip(RUN, begin), ("Query", "ROLLBACK")]
        assert_nothing_left(conn, True)


def test_a_pooled_call_is_one_round_trip_and_leaves_no_claims(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    # One connection: the anonymous call after the user's reuses it.
    with ConnectionPool(login_dsn(USER_LOGIN), min_size=1, max_size=1, open=True) as pool:
        anonymous = Memory(pool)
        user = anonymous.as_user(grant())
        user.list_files(org)
        with pool.connection() as conn:
            pgconn = conn.pgconn
        with traced(pgconn) as sent:
            user.run(org, CREATE_A)
        assert waits(sent) == one_trip(RUN)
        with pytest.raises(pgmemory.Forbidden):
            anonymous.list_files(org)
        with pool.connection() as conn:
            assert_nothing_left(conn, False)


def test_an_async_call_is_one_round_trip(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    user_id = grant()

    async def go() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        async with await psycopg.AsyncConnection.connect(login_dsn(SERVICE_LOGIN)) as conn:
            user = AsyncMemory(conn).as_user(user_id)
            await user.list_files(org)
            with traced(conn.pgconn) as ok:
                await user.run(org, CREATE_A)
            with traced(conn.pgconn) as failed, pytest.raises(pgmemory.NotFound):
                await user.run(org, MISSING)
            assert (conn.info.transaction_status, conn.autocommit) == (IDLE, False)
            cur = await conn.execute("SELECT current_setting('request.jwt.claims', true)")
            assert await cur.fetchone() == ("",)
        return ok, failed

    ok, failed = asyncio.run(go())
    assert waits(ok) == one_trip(RUN)
    assert waits(failed) == [*one_trip(RUN), ("Query", "ROLLBACK")]
