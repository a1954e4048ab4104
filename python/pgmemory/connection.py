"""Where a client's connections come from, and how one call is executed.

A client is given a DSN (it then owns one connection, opened on first use), a
connection (borrowed: never closed by us) or a pool. Every call runs in one
transaction: set the caller's claims transaction-locally, run the call's SQL,
commit; on error roll back and raise the translated error. A connection that is
already inside a transaction gets a savepoint instead (psycopg's nesting rule),
and then the claims stay set until that outer transaction ends.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, TypeVar

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .calls import Call
from .errors import translate

T = TypeVar("T")

# is_local=true: the claims end with the transaction, so they never leak to the
# next user of a pooled or shared connection.
SET_CLAIMS = "SELECT set_config('request.jwt.claims', %s, true)"

# Connections whose pgvector adapters have been looked up (once per connection).
_prepared: weakref.WeakSet[Any] = weakref.WeakSet()


def _prepare(conn: psycopg.Connection[Any]) -> None:
    if conn in _prepared:
        return
    # Raises ProgrammingError when no `vector` type is on this connection's search_path;
    # the calls then still work with plain float arrays.
    with suppress(psycopg.ProgrammingError):
        register_vector(conn)
    _prepared.add(conn)


async def _prepare_async(conn: psycopg.AsyncConnection[Any]) -> None:
    if conn in _prepared:
        return
    with suppress(psycopg.ProgrammingError):  # as above
        await register_vector_async(conn)
    _prepared.add(conn)


def _closed_error() -> psycopg.InterfaceError:
    return psycopg.InterfaceError("the pgmemory client is closed")


class Source:
    """Sync connections: a pool's, or one connection guarded by a lock."""

    def __init__(self, target: str | psycopg.Connection[Any] | ConnectionPool[Any]) -> None:
        if not isinstance(target, (str, psycopg.Connection, ConnectionPool)):
            raise TypeError(
                "Memory needs a DSN, a psycopg.Connection or a psycopg_pool.ConnectionPool,"
                f" got {type(target).__name__}"
            )
        self._dsn = target if isinstance(target, str) else None
        self._pool = target if isinstance(target, ConnectionPool) else None
        self._conn = target if isinstance(target, psycopg.Connection) else None
        self._closed = False
        self._lock = threading.Lock()  # one transaction at a time on a single connection

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
            return
        with self._lock:
            if self._closed:
                raise _closed_error()
            if self._dsn is not None and (self._conn is None or self._conn.closed):
                # Autocommit: between calls the connection sits idle, not in a transaction.
                self._conn = psycopg.connect(self._dsn, autocommit=True)
            assert self._conn is not None
            yield self._conn

    def close(self) -> None:
        """Close the connection we opened from a DSN; borrowed ones stay open."""
        with self._lock:
            self._closed = self._dsn is not None
            if self._dsn is not None and self._conn is not None:
                self._conn.close()
                self._conn = None

    def execute(self, claims: str | None, call: Call[T]) -> T:
        login = None
        try:
            with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
                login = conn.info.user
                _prepare(conn)
                if claims is not None:
                    cur.execute(SET_CLAIMS, (claims,))
                cur.execute(call.sql, call.params)
                rows = cur.fetchall()
        except psycopg.Error as exc:
            err = translate(exc, login)
            if err is exc:
                raise
            raise err from exc
        return call.shape(rows)


class AsyncSource:
    """Async connections: a pool's, or one connection guarded by a lock."""

    def __init__(
        self, target: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any]
    ) -> None:
        if not isinstance(target, (str, psycopg.AsyncConnection, AsyncConnectionPool)):
            raise TypeError(
                "AsyncMemory needs a DSN, a psycopg.AsyncConnection or a"
                f" psycopg_pool.AsyncConnectionPool, got {type(target).__name__}"
            )
        self._dsn = target if isinstance(target, str) else None
        self._pool = target if isinstance(target, AsyncConnectionPool) else None
        self._conn = target if isinstance(target, psycopg.AsyncConnection) else None
        self._closed = False
        self._lock = asyncio.Lock()  # binds to the running loop on first contention only

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._pool is not None:
            async with self._pool.connection() as conn:
                yield conn
            return
        async with self._lock:
            if self._closed:
                raise _closed_error()
            if self._dsn is not None and (self._conn is None or self._conn.closed):
                self._conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            assert self._conn is not None
            yield self._conn

    async def close(self) -> None:
        async with self._lock:
            self._closed = self._dsn is not None
            if self._dsn is not None and self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def execute(self, claims: str | None, call: Call[T]) -> T:
        login = None
        try:
            async with (
                self.connection() as conn,
                conn.transaction(),
                conn.cursor() as cur,
            ):
                login = conn.info.user
                await _prepare_async(conn)
                if claims is not None:
                    await cur.execute(SET_CLAIMS, (claims,))
                await cur.execute(call.sql, call.params)
                rows = await cur.fetchall()
        except psycopg.Error as exc:
            err = translate(exc, login)
            if err is exc:
                raise
            raise err from exc
        return call.shape(rows)
