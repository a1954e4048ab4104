"""`AsyncSource`: the connections of an `AsyncMemory`, and how one call is executed.

See pgmemory.connection.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from .._common import SET_CLAIMS, closed_error
from ..calls import Call, T
from ..errors import translate

# Connections whose pgvector adapters have been looked up (once per connection).
_prepared: weakref.WeakSet[Any] = weakref.WeakSet()


async def _prepare(conn: psycopg.AsyncConnection[Any]) -> None:
    if conn in _prepared:
        return
    # Raises ProgrammingError when no `vector` type is on this connection's search_path;
    # the calls then still work with plain float arrays.
    with suppress(psycopg.ProgrammingError):
        await register_vector_async(conn)
    _prepared.add(conn)


class AsyncSource:
    """The connections of an `AsyncMemory`: a pool's, or one connection guarded by a lock."""

    def __init__(
        self,
        target: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        replica: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any] | None = None,
    ) -> None:
        if not isinstance(target, (str, psycopg.AsyncConnection, AsyncConnectionPool)):
            raise TypeError(
                "AsyncMemory needs a DSN, a psycopg.AsyncConnection or a"
                f" psycopg_pool.AsyncConnectionPool, got {type(target).__name__}"
            )
        # Where the calls that never write go: a hot standby (or any read replica).
        self._replica = AsyncSource(replica) if replica is not None else None
        self._dsn = target if isinstance(target, str) else None
        self._pool = target if isinstance(target, AsyncConnectionPool) else None
        self._conn = target if isinstance(target, psycopg.AsyncConnection) else None
        self._closed = False
        # One transaction at a time on a single connection. An asyncio.Lock binds to
        # the running loop on first contention only.
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection for one call: the pool's, or the single one (opened from the DSN
        on first use, and again after it was lost), held under the lock."""
        if self._pool is not None:
            async with self._pool.connection() as conn:
                yield conn
            return
        async with self._lock:
            if self._closed:
                raise closed_error()
            if self._dsn is not None and (self._conn is None or self._conn.closed):
                # Autocommit: between calls the connection sits idle, not in a transaction.
                self._conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            assert self._conn is not None
            yield self._conn

    async def close(self) -> None:
        """Close the connections we opened from a DSN; borrowed ones stay open."""
        if self._replica is not None:
            await self._replica.close()
        async with self._lock:
            self._closed = self._dsn is not None
            if self._dsn is not None and self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def execute(self, claims: str | None, call: Call[T]) -> T:
        """Run `call` in one transaction as `claims`; a psycopg error is raised translated.
        A call that never writes goes to the replica when there is one."""
        if call.read_only and self._replica is not None:
            return await self._replica.execute(claims, call)
        login = None
        try:
            async with (
                self.connection() as conn,
                conn.transaction(),
                conn.cursor() as cur,
            ):
                login = conn.info.user
                await _prepare(conn)
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
